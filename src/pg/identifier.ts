import { InvalidOptionError } from '../core/errors.js';

// NAMEDATALEN - 1: PostgreSQL silently truncates longer identifiers, which would make two schema
// names collide.
const MAX_IDENTIFIER_BYTES = 63;

/**
 * Asserts that `schemaName` can name a PostgreSQL schema as given: a non-empty string of at most
 * 63 UTF-8 bytes without NUL. Any other character is allowed, since it is always quoted.
 *
 * @throws {@link InvalidOptionError} otherwise
 */
export function assertSchemaName(schemaName: unknown): asserts schemaName is string {
  if (
    typeof schemaName !== 'string' ||
    schemaName.length === 0 ||
    !schemaName.isWellFormed() ||
    schemaName.includes('\u0000') ||
    Buffer.byteLength(schemaName, 'utf8') > MAX_IDENTIFIER_BYTES
  ) {
    throw new InvalidOptionError(
      `schema must be a non-empty string of at most ${MAX_IDENTIFIER_BYTES} UTF-8 bytes without NUL, got ${
        typeof schemaName === 'string' ? JSON.stringify(schemaName.slice(0, 80)) : typeof schemaName
      }`,
    );
  }
}

/** Quotes a PostgreSQL identifier, doubling any `"` inside it. */
export function quoteIdentifier(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}
