/**
 * How many token values each millisecond of the real clock spans. The low bits of a generated
 * token are random, so two processes claiming one key in the same millisecond almost never draw
 * the same one; at 1,024 per millisecond a token stays below 2^53 (a safe integer) until the
 * year 2248.
 */
const TOKENS_PER_MILLISECOND = 1024;

// The last token this process handed out: the next one is always at least two more, so a token
// and the takeover token derived from it (one more, see takeoverToken) never meet another
// generated token of this process, however the real clock moves.
let lastIssued = 0;

// Random values drawn a block at a time: one call to the system's generator costs about as much
// as a whole block, and every claim needs one value.
const RANDOM_BLOCK = 512;
const random = new Uint16Array(RANDOM_BLOCK);
let unused = 0;

function randomBits(): number {
  if (unused === 0) {
    crypto.getRandomValues(random);
    unused = RANDOM_BLOCK;
  }
  unused -= 1;
  return random[unused] as number;
}

/**
 * A fresh fencing token for an `acquire` that may start an ownership of a key: the real clock's
 * milliseconds times 1,024 plus an even random number below 1,024, raised to two more than the
 * last token this process issued when the clock has not moved on (or moved back).
 *
 * Generated tokens are even: the takeover of a pending row sets its token to one more than the
 * greater of its old token and this one, an odd number when this one wins, so whether a statement
 * inserted the key afresh or took it over shows in the token it returns (equal to this one: fresh).
 *
 * It reads `Date.now()`, never a store's injectable clock: tokens must keep growing while a test
 * freezes the caller's `now`. Within one process every token is greater than the one before;
 * across processes a later claim gets a greater token as long as their clocks run forward, and two
 * claims of one key can only draw the same token in the same millisecond with the same random bits.
 */
export function nextFencingToken(): number {
  const drawn =
    Date.now() * TOKENS_PER_MILLISECOND + (randomBits() % (TOKENS_PER_MILLISECOND / 2)) * 2;
  lastIssued = Math.max(drawn, lastIssued + 2);
  return lastIssued;
}
