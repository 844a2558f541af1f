import * as crypto from 'node:crypto';

/**
 * The SHA-256 of `text`'s UTF-8 bytes, in hex: one call where Node has `crypto.hash` (20.12 and
 * later), so no `Hash` object is built per fingerprint; a `Hash` object otherwise. Same digest.
 */
export const sha256Hex: (text: string) => string =
  typeof crypto.hash === 'function'
    ? (text) => crypto.hash('sha256', text, 'hex')
    : (text) => crypto.createHash('sha256').update(text).digest('hex');
