/**
 * The least fresh token: above every token of the earlier clock-based rule (real-clock
 * milliseconds × 1,024, below 2^52 until the year 2112), the counters of older releases and the 1
 * of the lease-less `reserve`, so a fresh token never meets a token an older process handed out.
 */
const FRESH_BASE = 2 ** 52;

/**
 * How many random bits a fresh token carries. Two claims of one key draw the same token with a
 * chance of 2^-50 (about 1 in 10^15), whatever their clocks read. Fresh tokens span
 * [2^52, 2^52 + 2^51), leaving 2^51 takeovers (each one more) before the safe integer's end.
 */
const RANDOM_BITS = 50;
const HIGH_BITS = RANDOM_BITS - 32;

// Random values drawn a block at a time: one call to the system's generator costs about as much
// as a whole block, and every claim needs two values.
const RANDOM_BLOCK = 512;
const random = new Uint32Array(RANDOM_BLOCK);
let unused = 0;

function randomWord(): number {
  if (unused === 0) {
    crypto.getRandomValues(random);
    unused = RANDOM_BLOCK;
  }
  unused -= 1;
  return random[unused] as number;
}

/**
 * A fresh fencing token for an `acquire` that may insert a missing key: 2^52 plus an even random
 * number of 50 bits (`crypto.getRandomValues`). It reads no clock: a token must not repeat for a
 * key however the clocks of the processes claiming it read (frozen, equal, or hours apart), and a
 * clock in the token would only narrow its random part.
 *
 * What the row knows is used where there is a row: a takeover of a lapsed lease sets the token to
 * one more than the greater of the row's token and this one (see `takeoverToken`), so it is
 * greater than every token the row carried. Where the key was deleted (released, purged), nothing
 * of its past tokens is left, and only the random bits keep a stale owner's token apart from the
 * next owner's.
 *
 * Fresh tokens are even: a takeover's token is one more than this one when this one wins, odd, so
 * whether a statement inserted the key afresh or took it over shows in the token it returns (equal
 * to this one: fresh).
 */
export function nextFencingToken(): number {
  const high = randomWord() % 2 ** HIGH_BITS;
  const drawn = high * 2 ** 32 + randomWord();
  return FRESH_BASE + drawn * 2;
}
