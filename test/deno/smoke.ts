// Run by test/runtimes/deno-runtime.test.ts under Deno: the libSQL store on a local file and, when
// DATABASE_URL is set, the PostgreSQL store over node-postgres, each through one retention cycle
// and one fenced takeover. Prints one JSON line of what it saw.

import type { LeasedIdempotencyStore } from '../../src/core/store.js';
import { openLibsqlStore } from '../../src/libsql/index.js';
import { openPgStore } from '../../src/pg/index.js';

async function exercise(store: LeasedIdempotencyStore<unknown>) {
  const first = await store.acquire('k', 'd', { expires: 100, now: 1, leaseSeconds: 5 });
  const second = await store.acquire('k', 'd', { expires: 100, now: 10, leaseSeconds: 5 });
  const tokenOf = (outcome: typeof first) =>
    outcome.status === 'acquired' ? outcome.fencingToken : undefined;
  return {
    reserve: await store.reserve('r', 'd', 5),
    finish: await store.finish('r', 'd', { receipt: 1 }),
    fetch: await store.fetch('r', 4),
    purge: await store.purge(5),
    staleFinish: await store.finish('k', 'd', { by: 1 }, tokenOf(first)),
    currentFinish: await store.finish('k', 'd', { by: 2 }, tokenOf(second)),
    counts: await store.counts(),
  };
}

// Only the little of Deno's global this script reads: Node's types do not declare it.
declare const Deno: { readonly args: string[]; readonly version: { readonly deno: string } };

const [dir, pgUrl, schema] = Deno.args;
const seen: Record<string, unknown> = { runtime: `deno ${Deno.version.deno}` };
if (dir === undefined) throw new Error('usage: smoke.ts <dir> [postgres-url schema]');
const libsql = await openLibsqlStore(`file:${dir}/deno-smoke.db`);
try {
  seen.libsql = await exercise(libsql);
} finally {
  await libsql.close();
}
if (pgUrl) {
  const pg = await openPgStore(pgUrl, { schema });
  try {
    seen.pg = await exercise(pg);
  } finally {
    await pg.close();
  }
}
console.log(JSON.stringify(seen));
