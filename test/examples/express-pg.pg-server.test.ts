import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { quoteIdentifier } from '../../src/pg/identifier.js';
import { spawnTs } from '../support/child.js';
import { idem, jsonLine } from '../support/cli.js';
import { serverUrl, uniqueName } from '../support/pg.js';
import { until } from '../support/waiting.js';

const url = serverUrl() ?? '';
const MAIN = fileURLToPath(new URL('../../examples/express-pg/main.ts', import.meta.url));

// A database of its own: the example's migrations make `keys` and `orders` in `public`.
async function withFreshDatabase(run: (target: string, reader: pg.Client) => Promise<void>) {
  const name = uniqueName('expg');
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${quoteIdentifier(name)}`);
    const target = new URL(url);
    target.pathname = `/${name}`;
    const reader = new pg.Client({ connectionString: target.toString() });
    await reader.connect();
    try {
      await run(target.toString(), reader);
    } finally {
      await reader.end();
    }
  } finally {
    await admin.query(`DROP DATABASE IF EXISTS ${quoteIdentifier(name)} WITH (FORCE)`);
    await admin.end();
  }
}

async function count(reader: pg.Client, query: string): Promise<number> {
  const { rows } = await reader.query<{ n: string }>(query);
  return Number(rows[0]?.n);
}

describe('examples/express-pg against the real server', () => {
  it('migrates with the app’s drizzle-kit files, replays a retried POST, sweeps, and stops on SIGTERM', async () => {
    await withFreshDatabase(async (target, reader) => {
      const running = spawnTs(MAIN, [], {
        DATABASE_URL: target,
        PORT: '0',
        IDEM_SWEEP_INTERVAL_SECONDS: '1',
      });
      let stdout = '';
      running.child.stdout?.on('data', (chunk: Buffer) => {
        stdout += chunk.toString();
      });
      try {
        await until(() => {
          // A child that ended before listening fails the test now, with what it printed.
          if (running.child.exitCode !== null) throw new Error(`the example exited: ${stdout}`);
          return /listening on (http:\/\/\S+)/.test(stdout);
        }, 50);
        const base = /listening on (http:\/\/\S+)/.exec(stdout)?.[1] ?? '';

        const post = () =>
          fetch(`${base}/orders`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', 'idempotency-key': '"order-1"' },
            body: JSON.stringify({ item: 'book', quantity: 2 }),
          });
        const first = await post();
        const firstBody = await first.json();
        expect(first.status).toBe(201);
        expect(firstBody).toMatchObject({ item: 'book', quantity: 2 });
        const retry = await post();
        expect(retry.status).toBe(201);
        expect(retry.headers.get('idempotent-replayed')).toBe('true');
        expect(await retry.json()).toEqual(firstBody);
        expect(await count(reader, 'SELECT count(*) AS n FROM orders')).toBe(1);

        // The app's journal holds its migration, ours records the adopted table.
        expect(await count(reader, 'SELECT count(*) AS n FROM drizzle.__drizzle_migrations')).toBe(
          1,
        );
        expect(
          await count(reader, 'SELECT count(*) AS n FROM public.__idempotency_migrations'),
        ).toBeGreaterThan(0);

        // An answer past its retention: the built-in sweeper deletes it, no cron job involved.
        await reader.query(
          "INSERT INTO keys (id, fingerprint, status, response, expires) VALUES ('old-1', 'fp', 'done', '{}', 1)",
        );
        await until(
          async () =>
            (await count(reader, "SELECT count(*) AS n FROM keys WHERE id = 'old-1'")) === 0,
          50,
        );
        await until(() => stdout.includes('swept 1 expired key(s)'), 50);
        expect(await count(reader, "SELECT count(*) AS n FROM keys WHERE id = 'order-1'")).toBe(1);

        // The operator CLI reads the table the app's migrations made.
        const stats = await idem(['stats', '--url', target, '--json']);
        expect(stats.stderr).toBe('');
        expect(jsonLine(stats)).toMatchObject({ done: 1 });
      } finally {
        running.child.kill('SIGTERM');
      }
      const ended = await running.result;
      expect(ended.code, ended.stderr).toBe(0);
      expect(ended.stdout.endsWith('stopped\n')).toBe(true);
    });
  }, 300_000);
});
