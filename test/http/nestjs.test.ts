import 'reflect-metadata';
import { PGlite } from '@electric-sql/pglite';
import {
  BadRequestException,
  Body,
  type CanActivate,
  Controller,
  type ExecutionContext,
  Header,
  HttpCode,
  Inject,
  Injectable,
  Module,
  type PipeTransform,
  Post,
  StreamableFile,
  UseGuards,
} from '@nestjs/common';
import { sql } from 'drizzle-orm';
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IdempotencyModule, IdempotencyTransaction, Idempotent } from '../../src/http/nestjs.js';
import {
  type LibsqlHandlerTransaction,
  libsqlTransaction,
  openLibsqlStore,
} from '../../src/libsql/index.js';
import {
  applyPgMigrations,
  type PgHandlerTransaction,
  PgIdempotencyStore,
  pgTransaction,
} from '../../src/pg/index.js';
import { openSqliteStore, sqliteTransaction } from '../../src/sqlite/index.js';
import { fileUrl } from '../support/libsql-harness.js';
import { nestPlatforms, type RunningNestApp, startNestApp } from '../support/nest-app.js';
import { freshDbPath, tempDir } from '../support/temp.js';
import { type Deferred, deferred, until } from '../support/waiting.js';

const dir = tempDir('idem-nestjs-');

function post(
  url: string,
  path: string,
  key: string | undefined,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<Response> {
  return fetch(`${url}${path}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      ...(key === undefined ? {} : { 'idempotency-key': key }),
      ...headers,
    },
    body: JSON.stringify(body),
  });
}

// The warnings Nest logged, such as the one its Express adapter logs when it sends a problem as
// `application/json` instead of the type set on the response.
function warned(nest: RunningNestApp): string[] {
  return nest.warnings.filter((line) => line.startsWith('WARN'));
}

// What the handlers did, and a gate a test holds one of them at.
const state: { runs: number; gate: Deferred<void> | undefined } = { runs: 0, gate: undefined };

class DenyGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    return (
      Object.hasOwn(context.switchToHttp().getRequest<{ headers: object }>().headers, 'x-deny') ===
      false
    );
  }
}

class AmountPipe implements PipeTransform {
  transform(value: { amount?: unknown }): unknown {
    if (typeof value?.amount !== 'number') throw new BadRequestException('amount must be a number');
    return value;
  }
}

@Controller()
class PaymentsController {
  @Post('payments')
  @UseGuards(DenyGuard)
  @Idempotent({
    scope: (request) => {
      const client = request.headers['x-client'];
      return typeof client === 'string' ? client : undefined;
    },
  })
  async create(@Body(AmountPipe) body: { amount: number }) {
    state.runs += 1;
    const run = state.runs;
    if (state.gate) await state.gate.promise;
    if (body.amount < 0) throw new Error('the handler failed');
    return { id: `p_${run}`, amount: body.amount };
  }

  @Post('text')
  @HttpCode(200)
  @Header('x-route', 'text')
  @Idempotent({ storedHeaders: ['x-route'] })
  text() {
    state.runs += 1;
    return `plain answer ${state.runs}`;
  }

  @Post('shaped')
  @Idempotent({
    onError: (problem, request) => ({
      status: problem.status,
      headers: { 'x-shaped': 'yes' },
      body: { error: problem.code, path: request.url },
    }),
  })
  shaped(@Body() body: { amount: number }) {
    state.runs += 1;
    return { amount: body.amount };
  }

  @Post('bytes')
  @Idempotent()
  bytes() {
    state.runs += 1;
    return new StreamableFile(Buffer.from([0, 255, 7, state.runs]), {
      type: 'application/x-bytes',
    });
  }
}

for (const platform of nestPlatforms) {
  describe(`NestJS on ${platform}: @Idempotent() over a SQLite store`, () => {
    const store = openSqliteStore(freshDbPath(dir));
    let nest: RunningNestApp;

    beforeAll(async () => {
      nest = await startNestApp(platform, {
        imports: [IdempotencyModule.forRoot({ scope: 'global', store, leaseSeconds: 20 })],
        controllers: [PaymentsController],
      });
    });
    afterAll(async () => {
      await nest.close();
      store.close();
    });

    it('runs a new key once and replays its exact bytes with Idempotent-Replayed: true', async () => {
      const before = state.runs;
      const first = await post(nest.url, '/payments', '"pay-1"', { amount: 10 });
      expect(first.status).toBe(201);
      expect(first.headers.get('idempotent-replayed')).toBeNull();
      const firstBytes = Buffer.from(await first.arrayBuffer());
      expect(JSON.parse(firstBytes.toString('utf8'))).toEqual({
        id: `p_${before + 1}`,
        amount: 10,
      });
      const retry = await post(nest.url, '/payments', '"pay-1"', { amount: 10 });
      expect(retry.status).toBe(201);
      expect(retry.headers.get('idempotent-replayed')).toBe('true');
      expect(retry.headers.get('content-type')).toBe(first.headers.get('content-type'));
      expect(Buffer.from(await retry.arrayBuffer())).toEqual(firstBytes);
      expect(state.runs).toBe(before + 1);
    });

    it('replays text with its status and stored headers, and bytes as they were', async () => {
      const first = await post(nest.url, '/text', '"text-1"', {});
      expect(first.status).toBe(200);
      expect(first.headers.get('content-type')).toBe('text/plain; charset=utf-8');
      const text = await first.text();
      const retry = await post(nest.url, '/text', '"text-1"', {});
      expect([retry.status, retry.headers.get('x-route'), await retry.text()]).toEqual([
        200,
        'text',
        text,
      ]);
      const bytes = await post(nest.url, '/bytes', '"bytes-1"', {});
      const sent = Buffer.from(await bytes.arrayBuffer());
      expect(sent.subarray(0, 3)).toEqual(Buffer.from([0, 255, 7]));
      const replayed = await post(nest.url, '/bytes', '"bytes-1"', {});
      expect(replayed.headers.get('content-type')).toBe('application/x-bytes');
      expect(replayed.headers.get('idempotent-replayed')).toBe('true');
      expect(Buffer.from(await replayed.arrayBuffer())).toEqual(sent);
    });

    it('answers another body with the same key 422 problem+json, and never runs it', async () => {
      await post(nest.url, '/payments', '"pay-2"', { amount: 10 });
      const before = state.runs;
      const reused = await post(nest.url, '/payments', '"pay-2"', { amount: 11 });
      expect(reused.status).toBe(422);
      expect(reused.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(((await reused.json()) as { type: string }).type).toMatch(/key-reused$/);
      expect(state.runs).toBe(before);
      expect(warned(nest)).toEqual([]);
    });

    it('answers a missing or malformed key 400 problem+json', async () => {
      const missing = await post(nest.url, '/payments', undefined, { amount: 1 });
      expect(missing.status).toBe(400);
      expect(missing.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(await missing.json()).toMatchObject({
        status: 400,
        type: expect.stringMatching(/key-missing$/),
      });
      const malformed = await post(nest.url, '/payments', '"unterminated', { amount: 1 });
      expect(malformed.status).toBe(400);
      expect(malformed.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(((await malformed.json()) as { type: string }).type).toMatch(/key-malformed$/);
      expect(warned(nest)).toEqual([]);
    });

    it("answers problems with onError's own answer instead of the exception", async () => {
      const missing = await post(nest.url, '/shaped', undefined, { amount: 1 });
      expect(missing.status).toBe(400);
      expect(missing.headers.get('x-shaped')).toBe('yes');
      expect(await missing.json()).toEqual({ error: 'IDEMPOTENCY_KEY_MISSING', path: '/shaped' });
      expect((await post(nest.url, '/shaped', '"shaped-1"', { amount: 1 })).status).toBe(201);
      const reused = await post(nest.url, '/shaped', '"shaped-1"', { amount: 2 });
      expect(reused.status).toBe(422);
      expect(await reused.json()).toEqual({ error: 'IDEMPOTENCY_KEY_REUSED', path: '/shaped' });
    });

    it('answers a retry while the first runs 409 with the lease left as Retry-After', async () => {
      const gate = deferred();
      state.gate = gate;
      const first = post(nest.url, '/payments', '"pay-3"', { amount: 3 });
      try {
        await until(() => store.get('pay-3')?.status === 'pending');
        const busy = await post(nest.url, '/payments', '"pay-3"', { amount: 3 });
        expect(busy.status).toBe(409);
        expect(busy.headers.get('content-type')).toMatch(/^application\/problem\+json/);
        const retryAfter = Number(busy.headers.get('retry-after'));
        expect(retryAfter).toBeGreaterThanOrEqual(1);
        expect(retryAfter).toBeLessThanOrEqual(20);
        expect(((await busy.json()) as { type: string }).type).toMatch(/request-in-progress$/);
        expect(warned(nest)).toEqual([]);
      } finally {
        // A failed assertion must not leave the first request, and every later test, held.
        gate.resolve();
        state.gate = undefined;
      }
      expect((await first).status).toBe(201);
    });

    it('never stores a guard refusal: the retry with the same key runs', async () => {
      const denied = await post(nest.url, '/payments', '"pay-4"', { amount: 4 }, { 'x-deny': '1' });
      expect(denied.status).toBe(403);
      expect(store.get('pay-4')).toBeNull();
      const allowed = await post(nest.url, '/payments', '"pay-4"', { amount: 4 });
      expect(allowed.status).toBe(201);
      expect(allowed.headers.get('idempotent-replayed')).toBeNull();
    });

    it("never stores a pipe's 400: the corrected retry with the same key runs", async () => {
      const before = state.runs;
      const refused = await post(nest.url, '/payments', '"pay-5"', { amount: 'five' });
      expect(refused.status).toBe(400);
      expect(((await refused.json()) as { message: string }).message).toBe(
        'amount must be a number',
      );
      expect(store.get('pay-5')).toBeNull();
      const corrected = await post(nest.url, '/payments', '"pay-5"', { amount: 5 });
      expect(corrected.status).toBe(201);
      expect(state.runs).toBe(before + 1);
    });

    it('releases the key of a handler that throws, so the retry runs', async () => {
      const failed = await post(nest.url, '/payments', '"pay-6"', { amount: -1 });
      expect(failed.status).toBe(500);
      expect(store.get('pay-6')).toBeNull();
    });

    it('keeps the keys of different scopes apart', async () => {
      const before = state.runs;
      const a = await post(nest.url, '/payments', '"pay-7"', { amount: 7 }, { 'x-client': 'a' });
      const b = await post(nest.url, '/payments', '"pay-7"', { amount: 7 }, { 'x-client': 'b' });
      expect([a.status, b.status]).toEqual([201, 201]);
      expect(b.headers.get('idempotent-replayed')).toBeNull();
      expect(state.runs).toBe(before + 2);
      const again = await post(
        nest.url,
        '/payments',
        '"pay-7"',
        { amount: 7 },
        { 'x-client': 'a' },
      );
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect(await again.json()).toEqual(await a.json());
    });
  });
}

const OPTIONS_SOURCE = Symbol('options source');

@Injectable()
class StoreSource {
  constructor(@Inject(OPTIONS_SOURCE) readonly url: string) {}
}

@Module({
  providers: [StoreSource, { provide: OPTIONS_SOURCE, useValue: fileUrl(freshDbPath(dir)) }],
  exports: [StoreSource],
})
class StoreSourceModule {}

@Controller()
class LedgerController {
  @Post('ledger')
  @Idempotent({ transactional: true })
  async write(
    @IdempotencyTransaction() tx: LibsqlHandlerTransaction,
    @Body(AmountPipe) body: { amount: number },
  ) {
    await tx.run(sql`INSERT INTO ledger (amount) VALUES (${body.amount})`);
    if (body.amount === 0) throw new Error('the handler failed after writing');
    return { amount: body.amount };
  }
}

for (const platform of nestPlatforms) {
  describe(`NestJS on ${platform}: the transactional form over libSQL, from forRootAsync`, () => {
    let nest: RunningNestApp;
    let store: Awaited<ReturnType<typeof openLibsqlStore>> | undefined;

    beforeAll(async () => {
      nest = await startNestApp(platform, {
        imports: [
          IdempotencyModule.forRootAsync({
            imports: [StoreSourceModule],
            inject: [StoreSource],
            useFactory: async (source: StoreSource) => {
              store = await openLibsqlStore(source.url);
              await store.db.run(
                sql`CREATE TABLE IF NOT EXISTS ledger (id INTEGER PRIMARY KEY, amount INTEGER NOT NULL)`,
              );
              return { store, transaction: libsqlTransaction(store), scope: 'global' as const };
            },
          }),
        ],
        controllers: [LedgerController],
      });
    });
    afterAll(async () => {
      await nest.close();
      store?.close();
    });

    const rows = async (amount: number) =>
      (
        await store?.db.all<{ amount: number }>(
          sql`SELECT amount FROM ledger WHERE amount = ${amount}`,
        )
      )?.length;

    it('commits the write with the answer; a retry replays it without a second write', async () => {
      const amount = platform === 'express' ? 101 : 102;
      const first = await post(nest.url, '/ledger', `"ledger-${amount}"`, { amount });
      expect(first.status).toBe(201);
      const retry = await post(nest.url, '/ledger', `"ledger-${amount}"`, { amount });
      expect(retry.headers.get('idempotent-replayed')).toBe('true');
      expect(await retry.json()).toEqual({ amount });
      expect(await rows(amount)).toBe(1);
    });

    it('rolls back the write of a handler that throws and releases the key', async () => {
      const key = `"ledger-zero-${platform}"`;
      expect((await post(nest.url, '/ledger', key, { amount: 0 })).status).toBe(500);
      expect(await rows(0)).toBe(0);
      expect(await store?.get(`ledger-zero-${platform}`)).toBeNull();
    });

    it("releases the key of a pipe's refusal before any transaction", async () => {
      const key = `"ledger-pipe-${platform}"`;
      expect((await post(nest.url, '/ledger', key, { amount: 'x' })).status).toBe(400);
      expect((await post(nest.url, '/ledger', key, { amount: 55 })).status).toBe(201);
    });
  });
}

@Controller()
class PgLedgerController {
  @Post('ledger')
  @Idempotent({ transactional: true })
  async write(
    @IdempotencyTransaction() tx: PgHandlerTransaction,
    @Body(AmountPipe) body: { amount: number },
  ) {
    await tx.execute(sql`INSERT INTO ledger (amount) VALUES (${body.amount})`);
    if (body.amount === 0) throw new Error('the handler failed after writing');
    return { amount: body.amount };
  }
}

describe('NestJS on fastify: the transactional form over PostgreSQL (PGlite)', () => {
  const pglite = new PGlite();
  const db = drizzlePglite({ client: pglite });
  let store: PgIdempotencyStore<unknown>;
  let nest: RunningNestApp;

  beforeAll(async () => {
    await applyPgMigrations(db);
    await db.execute(sql`CREATE TABLE ledger (id serial PRIMARY KEY, amount integer NOT NULL)`);
    store = new PgIdempotencyStore(db);
    nest = await startNestApp('fastify', {
      imports: [
        IdempotencyModule.forRoot({ scope: 'global', store, transaction: pgTransaction(store) }),
      ],
      controllers: [PgLedgerController],
    });
  });
  afterAll(async () => {
    await nest.close();
    await pglite.close();
  });

  const rows = async (amount: number) =>
    (await db.execute(sql`SELECT amount FROM ledger WHERE amount = ${amount}`)).rows.length;

  it('commits the write with the answer once, and rolls back a throw with its key released', async () => {
    expect((await post(nest.url, '/ledger', '"pg-1"', { amount: 7 })).status).toBe(201);
    const retry = await post(nest.url, '/ledger', '"pg-1"', { amount: 7 });
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(await rows(7)).toBe(1);
    expect((await post(nest.url, '/ledger', '"pg-0"', { amount: 0 })).status).toBe(500);
    expect(await rows(0)).toBe(0);
    expect(await store.get('pg-0')).toBeNull();
  });
});

describe('IdempotencyModule options', () => {
  it('refuses a bad option at once, and a transactional route without a runner', async () => {
    const store = openSqliteStore(freshDbPath(dir));
    expect(() => IdempotencyModule.forRoot({ scope: 'global', store, ttlSeconds: -1 })).toThrow(
      /ttlSeconds/,
    );
    expect(() => Idempotent({ leaseSeconds: 0 })).toThrow(/leaseSeconds/);
    expect(() =>
      IdempotencyModule.forRoot({ scope: 'global', store, transaction: sqliteTransaction(store) }),
    ).toThrow(/synchronous/);
    const nest = await startNestApp('express', {
      imports: [IdempotencyModule.forRoot({ scope: 'global', store })],
      controllers: [LedgerController],
    });
    try {
      const refused = await post(nest.url, '/ledger', '"no-runner"', { amount: 1 });
      expect(refused.status).toBe(500);
      expect(store.get('no-runner')).toBeNull();
    } finally {
      await nest.close();
      store.close();
    }
  });
});
