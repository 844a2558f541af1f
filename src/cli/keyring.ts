import type { Keyring } from '../core/encryption.js';
import { InvalidOptionError } from '../core/errors.js';

/** The environment variable the `idem` commands read the keyring from. */
export const KEYRING_VARIABLE = 'IDEM_ENCRYPTION_KEYS';

/**
 * The keyring written in {@link KEYRING_VARIABLE}: comma-separated `keyId:base64` pairs, each key
 * 32 bytes in standard base64, the first pair the current key (`2026-12:…,2026-11:…`); `undefined`
 * when the variable is unset or empty. The message of a refusal names the key id, never the key.
 *
 * @throws {@link InvalidOptionError} for a pair without a colon, a key that is not base64 of 32
 * bytes, or a key id the store refuses
 */
export function keyringFromEnvironment(value: string | undefined): Keyring | undefined {
  if (value === undefined || value.trim() === '') return undefined;
  const keys: Record<string, Uint8Array> = {};
  let current: string | undefined;
  for (const pair of value.split(',')) {
    const colon = pair.indexOf(':');
    if (colon <= 0) {
      throw new InvalidOptionError(
        `${KEYRING_VARIABLE} holds keyId:base64 pairs separated by commas`,
      );
    }
    const id = pair.slice(0, colon).trim();
    const encoded = pair.slice(colon + 1).trim();
    const bytes = /^[A-Za-z0-9+/]+={0,2}$/.test(encoded)
      ? Buffer.from(encoded, 'base64')
      : undefined;
    if (bytes === undefined || bytes.length !== 32) {
      throw new InvalidOptionError(
        `${KEYRING_VARIABLE}: the key of ${JSON.stringify(id)} must be 32 bytes in base64`,
      );
    }
    keys[id] = new Uint8Array(bytes);
    current ??= id;
  }
  return { keys, current: current as string };
}
