import { is, Param, Placeholder } from 'drizzle-orm';
import type { LeasedIdempotencyStore } from '../../src/core/store.js';
import { answerOfSize, type JsonObject, type RealisticKey, realisticKeys } from './inputs.js';
import { alternate, check, nowMs } from './measure.js';

/** Operations a server's pool runs at once in the per-operation comparisons. */
export const IN_FLIGHT = 8;

/**
 * The exact SQL text drizzle sends for a query, and its parameters filled in by placeholder name
 * in the same order: what the raw side of a comparison sends.
 */
export function rawSql(query: { toSQL(): { sql: string; params: unknown[] } }): {
  readonly text: string;
  readonly values: (named: Record<string, unknown>) => unknown[];
} {
  const { sql: text, params } = query.toSQL();
  const slots = params.map((param): { name: string } | { value: unknown } => {
    const inner = is(param, Param) ? param.value : param;
    return is(inner, Placeholder) ? { name: inner.name } : { value: inner };
  });
  return {
    text,
    values: (named) => slots.map((slot) => ('name' in slot ? named[slot.name] : slot.value)),
  };
}

/** Operations per second of `count` calls of `op`, {@link IN_FLIGHT} at a time. */
export async function opsPerSecondConcurrent(
  count: number,
  op: (index: number) => Promise<unknown>,
): Promise<number> {
  let next = 0;
  const worker = async () => {
    while (next < count) await op(next++);
  };
  const start = nowMs();
  await Promise.all(Array.from({ length: IN_FLIGHT }, worker));
  return count / ((nowMs() - start) / 1000);
}

/** The raw side: the driver sending the store's SQL, answering what the checks need. */
export interface RawOperations {
  /** Inserts the key as pending; the rows it changed. */
  reserve(key: string, fingerprint: string): Promise<number>;
  /** Stores the answer's JSON text on the pending row; the rows it changed. */
  finish(key: string, fingerprint: string, response: string): Promise<number>;
  /** The stored answer's JSON text while `expires > now`, if any. */
  fetch(key: string, now: number): Promise<string | null | undefined>;
}

/**
 * reserve, then finish, then fetch of the store against the raw side, each in `rounds` alternating
 * pairs of `count` operations on fresh UUID keys with 64-hex digests and 1 KB answers, every write
 * and read checked on both sides. Returns each operation's ops/s per round of each side.
 */
export async function compareServerOperations(
  store: LeasedIdempotencyStore<JsonObject>,
  raw: RawOperations,
  rounds: number,
  count: number,
) {
  const answers = Array.from({ length: count }, (_, i) => answerOfSize(1024, i));
  const keysOf = () => Array.from({ length: rounds }, () => realisticKeys(count));
  const ours = keysOf();
  const theirs = keysOf();
  const input = (side: RealisticKey[][], round: number, index: number) =>
    side[round]?.[index] as RealisticKey;
  const reserve = await alternate(
    rounds,
    (r) =>
      opsPerSecondConcurrent(count, async (i) => {
        const { key, fingerprint } = input(ours, r, i);
        check(await store.reserve(key, fingerprint, 1e9), 'reserve');
      }),
    (r) =>
      opsPerSecondConcurrent(count, async (i) => {
        const { key, fingerprint } = input(theirs, r, i);
        check((await raw.reserve(key, fingerprint)) === 1, 'raw reserve');
      }),
  );
  const finish = await alternate(
    rounds,
    (r) =>
      opsPerSecondConcurrent(count, async (i) => {
        const { key, fingerprint } = input(ours, r, i);
        check(await store.finish(key, fingerprint, answers[i] as JsonObject), 'finish');
      }),
    (r) =>
      opsPerSecondConcurrent(count, async (i) => {
        const { key, fingerprint } = input(theirs, r, i);
        check((await raw.finish(key, fingerprint, JSON.stringify(answers[i]))) === 1, 'raw finish');
      }),
  );
  const fetch = await alternate(
    rounds,
    (r) =>
      opsPerSecondConcurrent(count, async (i) => {
        check((await store.fetch(input(ours, r, i).key, 5)) !== null, 'fetch');
      }),
    (r) =>
      opsPerSecondConcurrent(count, async (i) => {
        const text = await raw.fetch(input(theirs, r, i).key, 5);
        check(text != null && JSON.parse(text) !== null, 'raw fetch');
      }),
  );
  return { reserve, finish, fetch };
}
