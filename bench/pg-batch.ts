import { compareBatching } from './support/batch-figures.js';
import { benchPool, createBenchDatabase } from './support/pg-database.js';
import type { BenchSize, GroupResult } from './support/report.js';
import { shippedPg } from './support/shipped.js';

const { openPgStore } = shippedPg;

// The pool both stores share: fewer connections than requests in flight, as a server under load
// has, so the plain store's statements queue for a connection while the batching one's share one.
const POOL_SIZE = 8;

/**
 * Full request cycles (first request, work, answer, retry replayed) of the shipped request path on
 * the PostgreSQL store with `batch: true` against the same store without it, one pool of 8
 * connections, with 32 and with 1 request in flight, alternating. The batch size distribution of
 * the 32-in-flight runs is reported beside them.
 */
export async function pgBatch(size: BenchSize): Promise<GroupResult> {
  const database = await createBenchDatabase('report_pgbatch');
  const pool = benchPool(database.url, POOL_SIZE);
  try {
    const batching = await openPgStore(pool, { batch: true });
    const plain = await openPgStore(pool);
    return await compareBatching('pg.batch', { batching, plain }, ['claims', 'finishes'], size);
  } finally {
    await pool.end();
    await database.drop();
  }
}
