import type { AddressInfo } from 'node:net';
import { sql } from 'drizzle-orm';
import Fastify from 'fastify';
import { afterAll, describe, expect, it } from 'vitest';
import { fastifyTransaction } from '../../src/http/fastify.js';
import { fetchTransaction } from '../../src/http/fetch.js';
import type { HttpResponse } from '../../src/http/response.js';
import {
  applyPgMigrations,
  type PgHandlerTransaction,
  PgIdempotencyStore,
  pgTransaction,
} from '../../src/pg/index.js';
import { serveFetch, type TestServer } from '../support/http-servers.js';
import { freshServerSchema, type ServerSchema } from '../support/pg.js';
import { deferred } from '../support/waiting.js';

// Runs only when DATABASE_URL is set (see vitest.config.ts); then an unreachable server fails it.
const url = process.env.DATABASE_URL as string;

type Handler = (tx: PgHandlerTransaction) => Promise<HttpResponse>;
type Runner = ReturnType<typeof pgTransaction>;

const adapters: readonly {
  name: string;
  start: (runner: Runner, handler: Handler, now: () => number) => Promise<TestServer>;
}[] = [
  {
    name: 'fastifyTransaction',
    async start(runner, handler, now) {
      const app = Fastify();
      app.post(
        '/payments',
        fastifyTransaction(runner, (_request, tx) => handler(tx), {
          scope: 'global',
          now,
          leaseSeconds: 30,
        }),
      );
      await app.listen({ port: 0, host: '127.0.0.1' });
      const { port } = app.server.address() as AddressInfo;
      return { url: `http://127.0.0.1:${port}`, close: () => app.close() };
    },
  },
  {
    name: 'fetchTransaction',
    start: (runner, handler, now) =>
      serveFetch(
        fetchTransaction(runner, (_request, tx) => handler(tx), {
          scope: 'global',
          now,
          leaseSeconds: 30,
        }),
      ),
  },
];

describe.each(adapters)('$name on the PostgreSQL server', ({ start }) => {
  let server: ServerSchema | undefined;
  let http: TestServer | undefined;
  afterAll(async () => {
    await http?.close();
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
    http = await start(
      pgTransaction(store),
      async (tx) => {
        runs += 1;
        const run = runs;
        await tx.execute(sql`INSERT INTO ${sql.identifier(schema)}.payments (run) VALUES (${run})`);
        if (run === 1) {
          // The first owner stalls with its payment written and its transaction open.
          wrote.resolve();
          await gate.promise;
        }
        return { status: 201, body: { run } };
      },
      () => clock,
    );
    const base = http.url;
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
});
