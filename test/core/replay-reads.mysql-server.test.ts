import { drizzle } from 'drizzle-orm/mysql2';
import mysql from 'mysql2/promise';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { applyMysqlMigrations, MysqlIdempotencyStore } from '../../src/mysql/index.js';
import { freshMysqlDatabase, type MysqlDatabase, mysqlUrl } from '../support/mysql.js';
import { finishedKey, httpReplays, storeReplays } from '../support/replays.js';

const url = mysqlUrl() as string;

// InnoDB shows no row version to a client. What every write of a row needs is its exclusive lock
// (an `INSERT … ON DUPLICATE KEY UPDATE` takes it even when it changes nothing), so another
// connection holds that lock (`SELECT … FOR UPDATE`) while the replays run: a replay that wrote or
// locked the row would wait for it, and the store's connections give up after one second. Its
// plain reads are consistent reads, which no row lock blocks.
describe('a replay reads, never writes, on the MySQL server', () => {
  let target: MysqlDatabase;
  let pool: mysql.Pool;
  let locker: mysql.Connection;
  let store: MysqlIdempotencyStore;
  beforeEach(async () => {
    target = await freshMysqlDatabase(url, 2);
    await applyMysqlMigrations(target.db);
    pool = mysql.createPool({ uri: target.url, connectionLimit: 2 });
    // Session settings of this test's own connections only; the server is left as it is.
    pool.pool.on('connection', (connection) => {
      connection.query('SET SESSION innodb_lock_wait_timeout = 1');
    });
    store = new MysqlIdempotencyStore(drizzle({ client: pool }));
    locker = await mysql.createConnection(target.url);
  });
  afterEach(async () => {
    await locker.end();
    await pool.end();
    await target.drop();
  });

  async function lockRow(id: string): Promise<void> {
    await locker.query('BEGIN');
    const [rows] = await locker.query('SELECT id FROM `keys` WHERE id = ? FOR UPDATE', [id]);
    expect(rows).toHaveLength(1);
  }

  // The measure can fail: a statement that takes the row's lock, even one that changes nothing,
  // is refused while the other connection holds it.
  async function expectLockRefusesWrites(id: string): Promise<void> {
    await expect(pool.query('UPDATE `keys` SET id = id WHERE id = ?', [id])).rejects.toMatchObject({
      errno: 1205,
    });
  }

  it('the retry of a finished key and another payload take no row lock', async () => {
    await finishedKey(store, 'k');
    await lockRow('k');
    await storeReplays(store, 'k');
    await expectLockRefusesWrites('k');
    await locker.query('ROLLBACK');
  });

  it('HTTP replays through the layer take no row lock', async () => {
    const http = httpReplays(store, 'k2');
    await http.first();
    await lockRow('k2');
    await http.replays();
    await expectLockRefusesWrites('k2');
    await locker.query('ROLLBACK');
  });
});
