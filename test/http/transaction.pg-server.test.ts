import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { sql } from 'drizzle-orm';
import { Hono } from 'hono';
import { afterAll, describe, expect, it } from 'vitest';
import { honoTransaction } from '../../src/http/hono.js';
import { applyPgMigrations, PgIdempotencyStore, pgTransaction } from '../../src/pg/index.js';
import { freshServerSchema, type ServerSchema } from '../support/pg.js';
import { deferred } from '../support/waiting.js';

// Runs only when DATABASE_URL is set (see vitest.config.ts); then an unreachable server fails it.
const url = process.env.DATABASE_URL as string;

describe('honoTransaction on the PostgreSQL server', () => {
  let server: ServerSchema | undefined;
  let http: ReturnType<typeof serve> | undefined;
  afterAll(async () => {
    http?.close();
    await server?.drop();
  });

  it('rolls back a stalled owner’s open transaction once a retry took its key over', async () => {
    server = await freshServerSchema(url, 4);
    const { schema, pool, db } = server;
    await applyPgMigrations(db, { schema });
    await pool.query(`CREATE TABLE "${schema}".payments (run integer NOT NULL)`);
    const store = new PgIdempotencyStore(db, { schema });
    let clock = 1000;
    let runs = 0;
    const wrote = deferred();
    const gate = deferred();
    const app = new Hono();
    app.post(
      '/payments',
      honoTransaction(
        pgTransaction(store),
        async (_c, tx) => {
          runs += 1;
          const run = runs;
          await tx.execute(
            sql`INSERT INTO ${sql.identifier(schema)}.payments (run) VALUES (${run})`,
          );
          if (run === 1) {
            // The first owner stalls with its payment written and its transaction open.
            wrote.resolve();
            await gate.promise;
          }
          return { status: 201, body: { run } };
        },
        { scope: 'global', now: () => clock, leaseSeconds: 30 },
      ),
    );
    http = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' });
    await new Promise((resolve) => (http as Server).once('listening', resolve));
    const base = `http://127.0.0.1:${((http as Server).address() as AddressInfo).port}`;
    const pay = () =>
      fetch(`${base}/payments`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': '"stall"' },
        body: '{"amount":1}',
      });

    const stalled = pay();
    await wrote.promise;
    clock += 31;
    const takeover = await pay();
    expect(takeover.status).toBe(201);
    expect(await takeover.json()).toEqual({ run: 2 });
    gate.resolve();
    const late = await stalled;
    expect(late.status).toBe(409);
    expect(((await late.json()) as { type: string }).type).toMatch(/request-superseded$/);
    const rows = await pool.query(`SELECT run FROM "${schema}".payments`);
    expect(rows.rows).toEqual([{ run: 2 }]);
    const replay = await pay();
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(await replay.json()).toEqual({ run: 2 });
  });

  it('answers 503 request-rolled-back when PostgreSQL rolls every attempt back, and runs again in place before that', async () => {
    const own = await freshServerSchema(url, 4);
    try {
      const { schema, pool, db } = own;
      await applyPgMigrations(db, { schema });
      await pool.query(
        `CREATE TABLE "${schema}".payments (key text NOT NULL, run integer NOT NULL)`,
      );
      const store = new PgIdempotencyStore(db, { schema });
      // How many attempts of each key conflict: another session changes the key's row after the
      // handler's snapshot, so recording the answer fails with 40001 under SERIALIZABLE.
      const conflicts: Record<string, number> = { once: 1, always: Number.POSITIVE_INFINITY };
      const runs: Record<string, number> = {};
      const app = new Hono();
      app.post(
        '/payments/:key',
        honoTransaction(
          pgTransaction(store, { isolationLevel: 'serializable' }),
          async (c, tx) => {
            const key = c.req.param('key') ?? '';
            runs[key] = (runs[key] ?? 0) + 1;
            const run = runs[key];
            await tx.execute(
              sql`INSERT INTO ${sql.identifier(schema)}.payments (key, run) VALUES (${key}, ${run})`,
            );
            if (run <= (conflicts[key] ?? 0)) {
              await pool.query(
                `UPDATE "${schema}".keys SET lease_until = lease_until WHERE id LIKE '%' || $1 || '%'`,
                [key],
              );
            }
            return { status: 201, body: { run } };
          },
          { scope: 'global' },
        ),
      );
      const local = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' });
      try {
        await new Promise((resolve) => (local as Server).once('listening', resolve));
        const base = `http://127.0.0.1:${((local as Server).address() as AddressInfo).port}`;
        const pay = (key: string) =>
          fetch(`${base}/payments/${key}`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', 'idempotency-key': `"${key}"` },
            body: '{"amount":1}',
          });
        const retried = await pay('once');
        expect(retried.status).toBe(201);
        expect(await retried.json()).toEqual({ run: 2 });
        const rolledBack = await pay('always');
        expect(rolledBack.status).toBe(503);
        expect(rolledBack.headers.get('retry-after')).toBe('1');
        const problem = (await rolledBack.json()) as { type: string; detail: string };
        expect(problem.type).toMatch(/request-rolled-back$/);
        expect(problem.detail).not.toMatch(/UPDATE|serialize/);
        expect(runs.always).toBe(3);
        const rows = await pool.query(`SELECT key, run FROM "${schema}".payments ORDER BY key`);
        expect(rows.rows).toEqual([{ key: 'once', run: 2 }]);
        // The key is free: the client's retry runs (no conflict any more).
        conflicts.always = 0;
        const again = await pay('always');
        expect(again.status).toBe(201);
        expect(await again.json()).toEqual({ run: 4 });
      } finally {
        local.close();
      }
    } finally {
      await own.drop();
    }
  });
});
