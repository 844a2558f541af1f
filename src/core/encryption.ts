import * as nodeCrypto from 'node:crypto';
import { AnswerUnreadableError, EncryptionKeyMissingError, InvalidOptionError } from './errors.js';
import type { MaybePromise } from './store.js';

/**
 * The keys answers are sealed with: every key id the store may meet, each with its 32-byte
 * AES-256 key, and the id new answers are sealed under. Keep a retired key in `keys` until
 * `idem rekey` has re-sealed its rows under `current`; a row sealed under an id missing here
 * cannot be read ({@link EncryptionKeyMissingError}).
 *
 * @example
 * ```ts
 * const keyring: Keyring = {
 *   keys: { '2026-11': oldKeyBytes, '2026-12': newKeyBytes },
 *   current: '2026-12',
 * };
 * const store = openSqliteStore('./idempotency.db', { encryption: keyring });
 * ```
 */
export interface Keyring {
  /** Key id → 32 random bytes. Ids: 1 to 64 of `A–Z a–z 0–9 _ . -`. */
  readonly keys: Readonly<Record<string, Uint8Array>>;
  /** The id of the key new answers are sealed under; one of `keys`. */
  readonly current: string;
}

/** The `encryption` option every store takes. */
export interface EncryptionOption {
  /** Seals stored answers and keys request fingerprints with this keyring; off when absent. */
  readonly encryption?: Keyring;
}

// A sealed answer: this prefix, the key id, a colon, then base64 of IV (12) ‖ ciphertext ‖ tag
// (16). JSON text never starts with `$`, so a stored value is sealed exactly when it starts with
// it, and a plaintext row written before encryption was turned on is told apart without a column.
const SEALED_PREFIX = '$aes256gcm:';
// A keyed fingerprint: this prefix, the key id, a colon, then the hex HMAC of the digest.
const KEYED_PREFIX = 'hmac-sha256:';
// WebCrypto's key type, as Node's types name it (the library is built without the DOM types).
type CryptoKey = nodeCrypto.webcrypto.CryptoKey;
const KEY_ID = /^[A-Za-z0-9_.-]{1,64}$/;
const IV_BYTES = 12;
const TAG_BYTES = 16;
const KEY_BYTES = 32;
// The fingerprint key is derived from each AES key, so one secret per id serves both uses without
// the same bytes keying two algorithms.
const FINGERPRINT_LABEL = new TextEncoder().encode('drizzle-idempotency fingerprint v1');

const utf8 = new TextEncoder();
const fromUtf8 = new TextDecoder('utf-8', { fatal: true });

// Node's and Bun's `Buffer` encodes base64 natively; `btoa` over a binary string took forty times
// as long to seal a 64 KB answer on Node 24. Workers without `nodejs_compat` have no `Buffer`: they
// take the portable path.
const NativeBuffer = (globalThis as { readonly Buffer?: typeof Buffer }).Buffer;

function toBase64(bytes: Uint8Array): string {
  if (NativeBuffer !== undefined) {
    return NativeBuffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64');
  }
  let binary = '';
  for (let at = 0; at < bytes.length; at += 0x8000) {
    binary += String.fromCharCode(...bytes.subarray(at, at + 0x8000));
  }
  return btoa(binary);
}

function fromBase64(text: string): Uint8Array | undefined {
  try {
    const binary = atob(text);
    const bytes = new Uint8Array(binary.length);
    for (let at = 0; at < binary.length; at++) bytes[at] = binary.charCodeAt(at);
    return bytes;
  } catch {
    return undefined;
  }
}

function toHex(bytes: Uint8Array): string {
  let hex = '';
  for (const byte of bytes) hex += byte.toString(16).padStart(2, '0');
  return hex;
}

/**
 * Whether a stored answer is sealed (as opposed to JSON text written without encryption).
 *
 * @example
 * ```ts
 * isSealed('{"receipt":1}'); // false
 * ```
 */
export function isSealed(stored: string): boolean {
  return stored.startsWith(SEALED_PREFIX);
}

/**
 * The key id a stored answer is sealed under, or `undefined` for a plaintext answer.
 *
 * @example
 * ```ts
 * sealedKeyId('$aes256gcm:2026-12:…'); // '2026-12'
 * ```
 */
export function sealedKeyId(stored: string): string | undefined {
  if (!isSealed(stored)) return undefined;
  const end = stored.indexOf(':', SEALED_PREFIX.length);
  return end < 0 ? '' : stored.slice(SEALED_PREFIX.length, end);
}

/**
 * The key id a keyed fingerprint was made under, or `undefined` for a fingerprint that is not
 * keyed (a plain digest, kept before encryption was turned on).
 *
 * @example
 * ```ts
 * keyedFingerprintKeyId('hmac-sha256:2026-12:9f…'); // '2026-12'
 * ```
 */
export function keyedFingerprintKeyId(stored: string): string | undefined {
  if (!stored.startsWith(KEYED_PREFIX)) return undefined;
  const end = stored.indexOf(':', KEYED_PREFIX.length);
  return end < 0 ? undefined : stored.slice(KEYED_PREFIX.length, end);
}

/**
 * Checks a keyring and copies its keys, so a caller mutating its object later changes nothing.
 *
 * @throws {@link InvalidOptionError} for a keyring that is not `{ keys, current }`, a key id
 * outside `A–Z a–z 0–9 _ . -` (1 to 64), a key that is not a `Uint8Array` of 32 bytes, or a
 * `current` that `keys` lacks
 */
function readKeyring(keyring: unknown): Map<string, Uint8Array> {
  if (typeof keyring !== 'object' || keyring === null) {
    throw new InvalidOptionError('encryption takes a keyring { keys, current }');
  }
  const { keys, current } = keyring as { keys?: unknown; current?: unknown };
  if (typeof keys !== 'object' || keys === null) {
    throw new InvalidOptionError('encryption.keys must be an object of key id → 32-byte key');
  }
  const copied = new Map<string, Uint8Array>();
  for (const [id, key] of Object.entries(keys)) {
    if (!KEY_ID.test(id)) {
      throw new InvalidOptionError(
        `encryption key id ${JSON.stringify(id)} must be 1 to 64 of A-Z a-z 0-9 _ . -`,
      );
    }
    if (!(key instanceof Uint8Array) || key.length !== KEY_BYTES) {
      const got = key instanceof Uint8Array ? `${key.length} bytes` : typeof key;
      throw new InvalidOptionError(
        `encryption key ${JSON.stringify(id)} must be a Uint8Array of ${KEY_BYTES} bytes, got ${got}`,
      );
    }
    copied.set(id, Uint8Array.from(key));
  }
  if (typeof current !== 'string' || !copied.has(current)) {
    throw new InvalidOptionError(
      `encryption.current must name one of the keyring's keys (${[...copied.keys()].join(', ') || 'none given'})`,
    );
  }
  return copied;
}

/**
 * Seals and opens stored answers with AES-256-GCM and keys request fingerprints with
 * HMAC-SHA-256, under one {@link Keyring}. A sealed answer carries its key id and is bound to its
 * row's id (the GCM additional data), so an answer copied onto another row does not open.
 *
 * Two engines give the same bytes: WebCrypto (`globalThis.crypto.subtle`: Node, Bun, Deno,
 * Workers), used by the asynchronous stores, and `node:crypto`, used by the synchronous ones
 * (better-sqlite3, bun:sqlite, a Durable Object's SQLite), whose operations cannot wait for a
 * promise. Either opens what the other sealed.
 */
export class Encryption {
  readonly #keys: ReadonlyMap<string, Uint8Array>;
  readonly #current: string;
  readonly #aesKeys = new Map<string, Promise<CryptoKey>>();
  readonly #hmacKeys = new Map<string, Promise<CryptoKey>>();

  /**
   * @param keyring - see {@link Keyring}
   * @throws {@link InvalidOptionError} for a keyring {@link readKeyring} refuses
   */
  constructor(keyring: Keyring) {
    this.#keys = readKeyring(keyring);
    this.#current = keyring.current;
  }

  /** The id new answers are sealed under. */
  get current(): string {
    return this.#current;
  }

  /** Whether the keyring holds `keyId`. */
  has(keyId: string): boolean {
    return this.#keys.has(keyId);
  }

  /** The AES key of `keyId`, or the typed error that names the missing id. */
  #key(keyId: string): Uint8Array {
    const key = this.#keys.get(keyId);
    if (key === undefined) throw new EncryptionKeyMissingError(keyId);
    return key;
  }

  #aesKey(keyId: string): Promise<CryptoKey> {
    let key = this.#aesKeys.get(keyId);
    if (key === undefined) {
      key = crypto.subtle.importKey('raw', this.#key(keyId), 'AES-GCM', false, [
        'encrypt',
        'decrypt',
      ]);
      this.#aesKeys.set(keyId, key);
    }
    return key;
  }

  /** Seals `text` (the answer's JSON text) for the row `id`, synchronously (`node:crypto`). */
  sealSync(id: string, text: string): string {
    const iv = nodeCrypto.randomBytes(IV_BYTES);
    const cipher = nodeCrypto.createCipheriv('aes-256-gcm', this.#key(this.#current), iv);
    cipher.setAAD(utf8.encode(id));
    const body = Buffer.concat([
      iv,
      cipher.update(text, 'utf8'),
      cipher.final(),
      cipher.getAuthTag(),
    ]);
    return `${SEALED_PREFIX}${this.#current}:${toBase64(body)}`;
  }

  /** Seals `text` (the answer's JSON text) for the row `id` with WebCrypto. */
  async seal(id: string, text: string): Promise<string> {
    const iv = crypto.getRandomValues(new Uint8Array(IV_BYTES));
    const sealed = await crypto.subtle.encrypt(
      { name: 'AES-GCM', iv, additionalData: utf8.encode(id) },
      await this.#aesKey(this.#current),
      utf8.encode(text),
    );
    const body = new Uint8Array(IV_BYTES + sealed.byteLength);
    body.set(iv);
    body.set(new Uint8Array(sealed), IV_BYTES);
    return `${SEALED_PREFIX}${this.#current}:${toBase64(body)}`;
  }

  // The key id and the IV ‖ ciphertext ‖ tag of a sealed value, refusing a malformed one.
  #parts(id: string, stored: string): { readonly keyId: string; readonly body: Uint8Array } {
    const keyId = sealedKeyId(stored) ?? '';
    const body = fromBase64(stored.slice(SEALED_PREFIX.length + keyId.length + 1));
    if (!KEY_ID.test(keyId) || body === undefined || body.length < IV_BYTES + TAG_BYTES) {
      throw new AnswerUnreadableError(id);
    }
    this.#key(keyId);
    return { keyId, body };
  }

  /** The JSON text of the stored answer of row `id`, synchronously (`node:crypto`). */
  openSync(id: string, stored: string): string {
    if (!isSealed(stored)) return stored;
    const { keyId, body } = this.#parts(id, stored);
    try {
      const decipher = nodeCrypto.createDecipheriv(
        'aes-256-gcm',
        this.#key(keyId),
        body.subarray(0, IV_BYTES),
      );
      decipher.setAAD(utf8.encode(id));
      decipher.setAuthTag(body.subarray(body.length - TAG_BYTES));
      const plain = Buffer.concat([
        decipher.update(body.subarray(IV_BYTES, body.length - TAG_BYTES)),
        decipher.final(),
      ]);
      return fromUtf8.decode(plain);
    } catch (error) {
      throw new AnswerUnreadableError(id, error);
    }
  }

  /** The JSON text of the stored answer of row `id`, with WebCrypto. */
  async open(id: string, stored: string): Promise<string> {
    if (!isSealed(stored)) return stored;
    const { keyId, body } = this.#parts(id, stored);
    const key = await this.#aesKey(keyId);
    try {
      const plain = await crypto.subtle.decrypt(
        { name: 'AES-GCM', iv: body.subarray(0, IV_BYTES), additionalData: utf8.encode(id) },
        key,
        body.subarray(IV_BYTES),
      );
      return fromUtf8.decode(plain);
    } catch (error) {
      throw new AnswerUnreadableError(id, error);
    }
  }

  #hmacKey(keyId: string): Promise<CryptoKey> {
    let key = this.#hmacKeys.get(keyId);
    if (key === undefined) {
      const aes = this.#key(keyId);
      key = crypto.subtle
        .importKey('raw', aes, { name: 'HMAC', hash: 'SHA-256' }, false, ['sign'])
        .then((root) => crypto.subtle.sign('HMAC', root, FINGERPRINT_LABEL))
        .then((derived) =>
          crypto.subtle.importKey('raw', derived, { name: 'HMAC', hash: 'SHA-256' }, false, [
            'sign',
          ]),
        );
      this.#hmacKeys.set(keyId, key);
    }
    return key;
  }

  /**
   * The keyed form of a request fingerprint under `keyId` (the current key by default):
   * `hmac-sha256:<keyId>:<hex>`. Without the key, a digest of a low-entropy body (an amount, a
   * card's last four digits) cannot be matched against guesses.
   */
  async fingerprint(digest: string, keyId: string = this.#current): Promise<string> {
    const mac = await crypto.subtle.sign('HMAC', await this.#hmacKey(keyId), utf8.encode(digest));
    return `${KEYED_PREFIX}${keyId}:${toHex(new Uint8Array(mac))}`;
  }

  /**
   * Whether a stored fingerprint is the one `digest` was kept under: the digest itself (a row
   * written before encryption was turned on) or its keyed form under any key of the keyring (a row
   * written before a rotation).
   *
   * @throws {@link EncryptionKeyMissingError} for a fingerprint keyed under an id the keyring
   *   lacks: whether the request is the same cannot be told, and calling it another request would
   *   answer a retry 422 for an answer that only a missing key keeps from being read
   */
  async fingerprintMatches(stored: string, digest: string): Promise<boolean> {
    if (stored === digest) return true;
    const keyId = keyedFingerprintKeyId(stored);
    if (keyId === undefined) return false;
    if (!this.#keys.has(keyId)) throw new EncryptionKeyMissingError(keyId);
    return (await this.fingerprint(digest, keyId)) === stored;
  }
}

/**
 * How a store of one mode seals and opens the answers of its rows: at once (`node:crypto`) on a
 * synchronous store, with WebCrypto's promises on an asynchronous one. Without a keyring it stores
 * JSON text as it is, and refuses a sealed one with {@link EncryptionKeyMissingError}.
 */
export interface AnswerSealing {
  /** The keyring's engine, when encryption is on. */
  readonly encryption: Encryption | undefined;
  /** The value stored for the answer `text` of row `id`. */
  seal(id: string, text: string): MaybePromise<string>;
  /** The JSON text of the stored value `stored` of row `id`. */
  open(id: string, stored: string): MaybePromise<string>;
}

const plain: AnswerSealing = {
  encryption: undefined,
  seal: (_id, text) => text,
  open: (_id, stored) => {
    if (isSealed(stored)) throw new EncryptionKeyMissingError(sealedKeyId(stored) ?? '');
    return stored;
  },
};

/**
 * The {@link AnswerSealing} of a store: `synchronous` for a store whose operations answer at once.
 *
 * @throws {@link InvalidOptionError} for a keyring {@link readKeyring} refuses
 */
export function answerSealing(keyring: Keyring | undefined, synchronous: boolean): AnswerSealing {
  if (keyring === undefined) return plain;
  const encryption = new Encryption(keyring);
  return synchronous
    ? {
        encryption,
        seal: (id, text) => encryption.sealSync(id, text),
        open: (id, stored) => encryption.openSync(id, stored),
      }
    : {
        encryption,
        seal: (id, text) => encryption.seal(id, text),
        open: (id, stored) => encryption.open(id, stored),
      };
}

/**
 * The {@link Encryption} a store seals its answers with, or `undefined` when it stores them as
 * JSON text (encryption off, or a store of another kind).
 */
export function encryptionOf(store: object): Encryption | undefined {
  const { encryption } = store as { readonly encryption?: unknown };
  return encryption instanceof Encryption ? encryption : undefined;
}

/**
 * The `encryption` option to hand on to a store, checked first: an open function calls it before
 * it opens a file or a pool, so a bad keyring changes nothing.
 *
 * @throws {@link InvalidOptionError} for a keyring {@link readKeyring} refuses
 */
export function checkedEncryption(options: EncryptionOption): EncryptionOption {
  if (options.encryption === undefined) return {};
  readKeyring(options.encryption);
  return { encryption: options.encryption };
}
