import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { sql } from 'drizzle-orm';
import { Hono } from 'hono';
import type { PoolConnection } from 'mysql2/promise';
import { afterAll, describe, expect, it } from 'vitest';
import { honoTransaction } from '../../src/http/hono.js';
import {
  applyMysqlMigrations,
  MysqlIdempotencyStore,
  mysqlTransaction,
} from '../../src/mysql/index.js';
import { freshMysqlDatabase, type MysqlDatabase } from '../support/mysql.js';

// Runs only when MYSQL_URL is set (see vitest.config.ts); then an unreachable server fails it.
const url = process.env.MYSQL_URL as string;

describe('honoTransaction when InnoDB rolls the transaction back (lock wait timeout 1205)', () => {
  let database: MysqlDatabase | undefined;
  afterAll(async () => database?.drop());

  it('runs it again in place, then answers 503 request-rolled-back with the key free', async () => {
    database = await freshMysqlDatabase(url, 4);
    const { db, pool } = database;
    await applyMysqlMigrations(db);
    await pool.query(
      'CREATE TABLE payments (ref VARCHAR(64) NOT NULL, run INT NOT NULL) ENGINE=InnoDB',
    );
    await pool.query("INSERT INTO payments (ref, run) VALUES ('p', 0)");
    const store = new MysqlIdempotencyStore(db);
    // Another session holds the payment's row locked: the handler's update waits for it past the
    // (shortened) lock wait timeout and fails with 1205, and the transaction rolls back whole.
    const holder: PoolConnection = await pool.getConnection();
    await holder.query('BEGIN');
    await holder.query("SELECT run FROM payments WHERE ref = 'p' FOR UPDATE");
    let runs = 0;
    const app = new Hono();
    app.post(
      '/payments',
      honoTransaction(
        mysqlTransaction(store),
        async (_c, tx) => {
          runs += 1;
          await tx.execute(sql`SET SESSION innodb_lock_wait_timeout = 1`);
          await tx.execute(sql`UPDATE payments SET run = ${runs} WHERE ref = 'p'`);
          return { status: 201, body: { run: runs } };
        },
        { scope: 'global' },
      ),
    );
    const local = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' });
    try {
      await new Promise((resolve) => (local as Server).once('listening', resolve));
      const base = `http://127.0.0.1:${((local as Server).address() as AddressInfo).port}`;
      const pay = () =>
        fetch(`${base}/payments`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'idempotency-key': '"locked"' },
          body: '{"amount":1}',
        });
      const rolledBack = await pay();
      expect(rolledBack.status).toBe(503);
      expect(rolledBack.headers.get('retry-after')).toBe('1');
      expect(((await rolledBack.json()) as { type: string }).type).toMatch(/request-rolled-back$/);
      expect(runs).toBe(3);
      expect((await holder.query('SELECT run FROM payments'))[0]).toEqual([{ run: 0 }]);
      expect(await store.get('locked')).toBeNull();
      // The lock is gone: the client's retry runs and commits once.
      await holder.query('COMMIT');
      const again = await pay();
      expect(again.status).toBe(201);
      expect(await again.json()).toEqual({ run: 4 });
      const [paid] = await pool.query('SELECT run FROM payments');
      expect(paid).toEqual([{ run: 4 }]);
    } finally {
      local.close();
      holder.release();
    }
  });
});
