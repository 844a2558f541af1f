import { InvalidOptionError } from '../core/errors.js';
import { DEFAULT_TABLE_NAME } from '../core/table-name.js';
import { DEFAULT_PG_SCHEMA } from '../pg/schema.js';
import { printableWord } from './keys.js';

/** The file used when no flag or environment variable names a store. */
export const DEFAULT_DB = './idempotency.db';

/**
 * Where a command's store lives: a SQLite file, a schema on a PostgreSQL server, or the database
 * a MySQL URL names.
 */
export type StoreLocation =
  | { readonly dialect: 'sqlite'; readonly path: string; readonly table: string }
  | {
      readonly dialect: 'pg';
      readonly url: string;
      readonly schema: string;
      readonly table: string;
      /** `false` for unnamed statements (`--no-prepare`), as a transaction pooler needs. */
      readonly prepare?: boolean;
    }
  | { readonly dialect: 'mysql'; readonly url: string; readonly table: string };

/** The flags every command takes to find its store, as parsed. */
export interface LocationFlags {
  /** `--db PATH`: a SQLite file. */
  readonly db?: string;
  /** `--url URL`: a PostgreSQL or MySQL connection string. */
  readonly url?: string;
  /** `--schema NAME`: the PostgreSQL schema; only with a PostgreSQL store. */
  readonly schema?: string;
  /** `--table NAME`: the keys table's name; default `keys`. */
  readonly table?: string;
  /** `false` with `--no-prepare`: unnamed statements on PostgreSQL. */
  readonly prepare?: boolean;
}

const PG_PROTOCOLS = ['postgres:', 'postgresql:'];
const MYSQL_PROTOCOL = 'mysql:';

/**
 * Asserts that `text` is a `postgres://`, `postgresql://` or `mysql://` connection string.
 *
 * @param text - the connection string as given
 * @param source - where the text came from, for the message (`--url`, `DATABASE_URL`)
 * @throws {@link InvalidOptionError} otherwise
 */
function assertServerUrl(text: string, source: string): void {
  const protocol = URL.canParse(text) ? new URL(text).protocol : undefined;
  if (protocol === undefined || ![...PG_PROTOCOLS, MYSQL_PROTOCOL].includes(protocol)) {
    throw new InvalidOptionError(
      `${source} must be a postgres://, postgresql:// or mysql:// connection string`,
    );
  }
}

/**
 * Decides which store a command works on. An explicit flag beats the environment, and this
 * tool's own variable beats a shared one: `--url`, else `--db` (commander refuses the two
 * together), else `IDEM_DB`, else `DATABASE_URL`, else `./idempotency.db`. `DATABASE_URL` is read
 * last because many tools on one machine set it for their own purposes; `IDEM_DB` only ever names
 * this store. Empty variables count as unset.
 *
 * @param flags - the parsed `--db`, `--url`, `--schema` and `--table`
 * @param env - the environment holding `DATABASE_URL` and `IDEM_DB`
 * @throws {@link InvalidOptionError} for a `--url`, or a `DATABASE_URL` when it is the one used,
 * that is not a PostgreSQL or MySQL URL (checked here rather than while commander reads the flag,
 * whose message would echo the URL and its password), or `--schema` with a SQLite or MySQL store
 */
export function resolveStoreLocation(
  flags: LocationFlags,
  env: Readonly<Record<string, string | undefined>>,
): StoreLocation {
  const envUrl = env.DATABASE_URL || undefined;
  const envDb = env.IDEM_DB || undefined;
  const table = flags.table ?? DEFAULT_TABLE_NAME;
  let location: StoreLocation;
  if (flags.url !== undefined) {
    assertServerUrl(flags.url, '--url');
    location = server(flags.url, flags.schema, table, flags.prepare);
  } else if (flags.db !== undefined) location = { dialect: 'sqlite', path: flags.db, table };
  else if (envDb !== undefined) location = { dialect: 'sqlite', path: envDb, table };
  else if (envUrl !== undefined) {
    assertServerUrl(envUrl, 'DATABASE_URL');
    location = server(envUrl, flags.schema, table, flags.prepare);
  } else location = { dialect: 'sqlite', path: DEFAULT_DB, table };
  if (location.dialect !== 'pg' && flags.schema !== undefined) {
    throw new InvalidOptionError(
      '--schema applies to a PostgreSQL store only (--url or DATABASE_URL)',
    );
  }
  return location;
}

function server(
  url: string,
  schema: string | undefined,
  table: string,
  prepare: boolean | undefined,
): StoreLocation {
  if (URL.canParse(url) && new URL(url).protocol === MYSQL_PROTOCOL) {
    return { dialect: 'mysql', url, table };
  }
  const pg = { dialect: 'pg', url, schema: schema ?? DEFAULT_PG_SCHEMA, table } as const;
  return prepare === false ? { ...pg, prepare } : pg;
}

/**
 * Names a store for messages: the file (as {@link printableWord} prints it), or the URL with its
 * password hidden (and the schema).
 */
export function describeLocation(location: StoreLocation): string {
  const table = location.table === DEFAULT_TABLE_NAME ? '' : ` (table "${location.table}")`;
  if (location.dialect === 'sqlite') return `${printableWord(location.path)}${table}`;
  const schema = location.dialect === 'pg' ? ` (schema "${location.schema}")` : '';
  return `${maskUrl(location.url)}${schema}${table}`;
}

const MASK = '***';
// Query parameters the drivers read a password from.
const PASSWORD_PARAMETER = /([?&](?:password|pass|pwd|sslpassword)=)([^&#\s]*)/gi;
// `scheme://userinfo@`, where userinfo runs to the last `@` of the text: a password holding an
// unencoded `@` or `/` is then hidden whole, and at worst more than the password is hidden.
const USERINFO = /^([a-z][a-z0-9+.-]*:\/\/)(.*)@/is;

/**
 * A connection string with its password replaced by `***`, for any message or output: the
 * userinfo's password, and any `password=` (or `pass`, `pwd`, `sslpassword`) query parameter.
 * The text is masked as text, not parsed: everything between `user:` and the last `@` is hidden,
 * so a URL no parser accepts, or a password holding an unencoded `@` or `/`, never shows it.
 *
 * @example
 * ```ts
 * maskUrl('postgres://app:s3cret@db:5432/x'); // 'postgres://app:***@db:5432/x'
 * maskUrl('postgres://app:s3cret@db:99999/x'); // 'postgres://app:***@db:99999/x'
 * ```
 */
export function maskUrl(text: string): string {
  const masked = text.replace(USERINFO, (_, scheme: string, userinfo: string) => {
    const colon = userinfo.indexOf(':');
    return colon < 0 ? `${scheme}${userinfo}@` : `${scheme}${userinfo.slice(0, colon)}:${MASK}@`;
  });
  return masked.replace(PASSWORD_PARAMETER, `$1${MASK}`);
}

/**
 * A message with each of `secrets` hidden where a connection string in it holds one: as the
 * password of a URL's userinfo (`scheme://user:SECRET@`), or as the value of a `password=` (or
 * `pass`, `pwd`, `sslpassword`) query parameter. The same text anywhere else (a database or a
 * host named like the password, a word of a driver's error) is left as it is, so a short password
 * does not blank out the rest of the message.
 *
 * @param text - the message, which may quote connection strings
 * @param secrets - the passwords to hide, as {@link urlSecrets} finds them
 * @example
 * ```ts
 * maskSecrets('no table at mysql://root:test@db/test', ['test']); // 'no table at mysql://root:***@db/test'
 * ```
 */
export function maskSecrets(text: string, secrets: readonly string[]): string {
  // Longest first, so a password that starts with another is hidden whole.
  const ordered = secrets.filter((secret) => secret !== '').sort((a, b) => b.length - a.length);
  let out = '';
  let copied = 0;
  for (let at = text.indexOf('://'); at >= 0; at = text.indexOf('://', at + 1)) {
    // The user name runs to the colon before the password; a `/`, `@` or space first means this
    // URL has no password.
    let colon = at + 3;
    while (colon < text.length && !' \t\n/@:'.includes(text.charAt(colon))) colon++;
    if (text.charAt(colon) !== ':') continue;
    const start = colon + 1;
    const secret = ordered.find(
      (candidate) =>
        text.startsWith(candidate, start) && text.charAt(start + candidate.length) === '@',
    );
    if (secret === undefined) continue;
    out += `${text.slice(copied, start)}${MASK}`;
    copied = start + secret.length;
    at = copied;
  }
  return `${out}${text.slice(copied)}`.replace(PASSWORD_PARAMETER, `$1${MASK}`);
}

/**
 * The passwords a text holds as a connection string would (see {@link maskUrl}), as written and
 * percent-decoded: what must never be printed, whatever message might echo the text.
 */
export function urlSecrets(text: string): string[] {
  const secrets = new Set<string>();
  const add = (secret: string) => {
    if (secret === '') return;
    secrets.add(secret);
    try {
      secrets.add(decodeURIComponent(secret));
    } catch {
      // A malformed escape: the text as written is the secret.
    }
  };
  const userinfo = USERINFO.exec(text)?.[2] ?? '';
  if (userinfo.includes(':')) add(userinfo.slice(userinfo.indexOf(':') + 1));
  for (const match of text.matchAll(PASSWORD_PARAMETER)) add(match[2] ?? '');
  return [...secrets];
}
