import 'reflect-metadata';
import { Controller, Post, Redirect } from '@nestjs/common';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IdempotencyModule, IdempotencyTransaction, Idempotent } from '../../src/http/nestjs.js';
import {
  type LibsqlHandlerTransaction,
  type LibsqlIdempotencyStore,
  libsqlTransaction,
  openLibsqlStore,
} from '../../src/libsql/index.js';
import { openSqliteStore, type SqliteIdempotencyStore } from '../../src/sqlite/index.js';
import { fileUrl } from '../support/libsql-harness.js';
import { nestPlatforms, type RunningNestApp, startNestApp } from '../support/nest-app.js';
import { freshDbPath, tempDir } from '../support/temp.js';

const dir = tempDir('idem-nest-redirect-');
const runs = { count: 0 };

@Controller()
class OrdersController {
  // Nest sends the returned url and status, not the decorator's.
  @Post('orders')
  @Redirect('/orders', 303)
  @Idempotent()
  create() {
    runs.count += 1;
    return { url: `/orders/o_${runs.count}` };
  }

  @Post('moved')
  @Redirect('/orders', 303)
  @Idempotent()
  moved() {
    runs.count += 1;
    return { url: `/orders/o_${runs.count}`, statusCode: 301 };
  }

  // Nothing returned: the decorator's url and status.
  @Post('static')
  @Redirect('/orders', 303)
  @Idempotent()
  fixed() {
    runs.count += 1;
  }
}

// The transactional form: the write and the recorded redirect commit together.
@Controller()
class TransferController {
  @Post('transfers')
  @Redirect('/transfers', 303)
  @Idempotent({ transactional: true })
  async create(@IdempotencyTransaction() tx: LibsqlHandlerTransaction) {
    runs.count += 1;
    await tx.run(sql`INSERT INTO transfers (id) VALUES (${runs.count})`);
    return { url: `/transfers/t_${runs.count}` };
  }
}

function post(url: string, path: string, key: string): Promise<Response> {
  return fetch(`${url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': `"${key}"` },
    body: '{}',
    redirect: 'manual',
  });
}

describe.each(nestPlatforms)('NestJS on %s: @Redirect() with @Idempotent()', (platform) => {
  let store: SqliteIdempotencyStore<unknown>;
  let running: RunningNestApp;

  beforeAll(async () => {
    store = openSqliteStore(freshDbPath(dir));
    running = await startNestApp(platform, {
      imports: [IdempotencyModule.forRoot({ scope: 'global', store })],
      controllers: [OrdersController],
    });
  });

  afterAll(async () => {
    await running.close();
    store.close();
  });

  it.each([
    ['/orders', 'returned url', 303],
    ['/moved', 'returned url and status', 301],
    ['/static', "decorator's url", 303],
  ] as const)(
    '%s: the first answer and its replay redirect to the %s (%i)',
    async (path, _what, status) => {
      const key = `${platform}${path}`;
      const before = runs.count;
      const first = await post(running.url, path, key);
      const location = path === '/static' ? '/orders' : `/orders/o_${before + 1}`;
      expect(first.status).toBe(status);
      expect(first.headers.get('location')).toBe(location);
      const firstBody = await first.text();

      const replay = await post(running.url, path, key);
      expect(runs.count).toBe(before + 1);
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(replay.status).toBe(status);
      expect(replay.headers.get('location')).toBe(location);
      expect(await replay.text()).toBe(firstBody);

      // What is stored is the redirect sent: its status and Location, never the returned object.
      const record = await store.get(key);
      expect(record?.status).toBe('done');
      const stored = record?.response as { status: number; headers: Record<string, string> };
      expect(stored.status).toBe(status);
      expect(stored.headers.location).toBe(location);
      expect(stored).not.toHaveProperty('body');
    },
  );
});

describe.each(nestPlatforms)('NestJS on %s: @Redirect() on a transactional route', (platform) => {
  let store: LibsqlIdempotencyStore<unknown>;
  let running: RunningNestApp;

  beforeAll(async () => {
    store = await openLibsqlStore(fileUrl(freshDbPath(dir)));
    await store.db.run(sql`CREATE TABLE transfers (id INTEGER PRIMARY KEY)`);
    running = await startNestApp(platform, {
      imports: [
        IdempotencyModule.forRoot({
          scope: 'global',
          store,
          transaction: libsqlTransaction(store),
        }),
      ],
      controllers: [TransferController],
    });
  });

  afterAll(async () => {
    await running.close();
    store.close();
  });

  it('commits the write with the redirect it sends, and replays that redirect', async () => {
    const key = `${platform}-transfer`;
    const before = runs.count;
    const first = await post(running.url, '/transfers', key);
    expect(first.status).toBe(303);
    expect(first.headers.get('location')).toBe(`/transfers/t_${before + 1}`);

    const replay = await post(running.url, '/transfers', key);
    expect(runs.count).toBe(before + 1);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.status).toBe(303);
    expect(replay.headers.get('location')).toBe(`/transfers/t_${before + 1}`);
    expect(await store.db.all(sql`SELECT id FROM transfers`)).toHaveLength(1);
  });
});
