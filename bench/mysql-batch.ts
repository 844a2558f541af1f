import mysql from 'mysql2/promise';
import type { MysqlBatchStats } from '../src/mysql/index.js';
import { layerCycle } from './peers.js';
import { sizeDistribution, sizesSince, withHeapPeak } from './support/batch-figures.js';
import { cyclesPerSecond } from './support/cycles.js';
import { median, pairedRatio, rotate } from './support/measure.js';
import type { BenchSize, GroupResult } from './support/report.js';
import { shippedMysql } from './support/shipped.js';

const { openMysqlStore } = shippedMysql;

const URL = process.env.MYSQL_URL || 'mysql://root@127.0.0.1:3306/test';

// The pool both stores share: fewer connections than requests in flight, as a server under load
// has, so the plain store's statements queue for a connection while the batching one's share one.
const POOL_SIZE = 8;

/**
 * Full request cycles (first request, work, answer, retry replayed) of the shipped request path on
 * the MySQL store with `batch: true` against the same store without it, one pool of 8 connections
 * to the real server (MYSQL_URL, default the local MariaDB), with 32 and with 1 request in flight,
 * alternating. The batch size distribution of the 32-in-flight runs is reported beside them. The
 * database `bench_batch_<pid>` is made and dropped here.
 */
export async function mysqlBatch({ quick }: BenchSize): Promise<GroupResult> {
  const count = quick ? 320 : 1600;
  const rounds = quick ? 5 : 15;
  const name = `bench_batch_${process.pid}`;
  const admin = await mysql.createConnection(URL);
  await admin.query(`CREATE DATABASE \`${name}\``);
  const target = new globalThis.URL(URL);
  target.pathname = `/${name}`;
  const pool = mysql.createPool({ uri: target.toString(), connectionLimit: POOL_SIZE });
  try {
    const batchingStore = await openMysqlStore(pool, { batch: true });
    const batching = layerCycle(batchingStore);
    const plain = layerCycle(await openMysqlStore(pool));
    // Warm both up (JIT, connections, the server's caches) before anything is timed.
    await rotate(2, {
      ours: () => cyclesPerSecond(batching.cycle, count, 32),
      theirs: () => cyclesPerSecond(plain.cycle, count, 32),
    });
    const one = await rotate(rounds, {
      ours: () => cyclesPerSecond(batching.cycle, count / 4, 1),
      theirs: () => cyclesPerSecond(plain.cycle, count / 4, 1),
    });
    const before = batchingStore.batchStats() as MysqlBatchStats;
    const heapPeaks = { batching: [] as number[], plain: [] as number[] };
    const many = await rotate(rounds, {
      ours: () => withHeapPeak(heapPeaks.batching, cyclesPerSecond(batching.cycle, count, 32)),
      theirs: () => withHeapPeak(heapPeaks.plain, cyclesPerSecond(plain.cycle, count, 32)),
    });
    const after = batchingStore.batchStats() as MysqlBatchStats;
    const details: Record<string, number> = {
      'mysql.batch.cycle1.perSec.batching': median(one.ours),
      'mysql.batch.cycle1.perSec.plain': median(one.theirs),
      'mysql.batch.cycle32.perSec.batching': median(many.ours),
      'mysql.batch.cycle32.perSec.plain': median(many.theirs),
      'mysql.batch.cycle32.heapPeakMb.batching': median(heapPeaks.batching),
      'mysql.batch.cycle32.heapPeakMb.plain': median(heapPeaks.plain),
    };
    for (const kind of ['gets', 'claims', 'finishes'] as const) {
      Object.assign(
        details,
        sizeDistribution('mysql.batch', kind, sizesSince(before[kind], after[kind])),
      );
    }
    await batching.close();
    await plain.close();
    return {
      metrics: {
        'mysql.batch.cycle32.vsPlain': pairedRatio(many),
        'mysql.batch.cycle1.vsPlain': pairedRatio(one),
      },
      details,
    };
  } finally {
    await pool.end();
    await admin.query(`DROP DATABASE \`${name}\``);
    await admin.end();
  }
}
