/**
 * The steps of `retentionCycle`, the same for every dialect: reserve with `'v1'` until 10, finish
 * with `{ receipt: 1 }`, purge at `now = 10`, then reserve again with `'v2'` until 20. On an empty
 * store the second reserve returns `true`: once its answer is purged a key is a new request.
 */
export const RETENTION_CYCLE = {
  first: { fingerprint: 'v1', expires: 10, response: { receipt: 1 } },
  purgeAt: 10,
  second: { fingerprint: 'v2', expires: 20 },
} as const;
