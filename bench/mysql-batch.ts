import mysql from 'mysql2/promise';
import { compareBatching } from './support/batch-figures.js';
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
export async function mysqlBatch(size: BenchSize): Promise<GroupResult> {
  const name = `bench_batch_${process.pid}`;
  const admin = await mysql.createConnection(URL);
  await admin.query(`CREATE DATABASE \`${name}\``);
  const target = new globalThis.URL(URL);
  target.pathname = `/${name}`;
  const pool = mysql.createPool({ uri: target.toString(), connectionLimit: POOL_SIZE });
  try {
    const batching = await openMysqlStore(pool, { batch: true });
    const plain = await openMysqlStore(pool);
    return await compareBatching(
      'mysql.batch',
      { batching, plain },
      ['gets', 'claims', 'finishes'],
      size,
    );
  } finally {
    await pool.end();
    await admin.query(`DROP DATABASE \`${name}\``);
    await admin.end();
  }
}
