import { afterAll, describe, it } from 'vitest';
import { openPgStore, type PgIdempotencyStore } from '../../src/pg/index.js';
import { serverUrl, uniqueName } from '../support/pg.js';
import { type Bouncer, pgbouncerBinary, startPgbouncer } from '../support/pgbouncer.js';
import { expectOneSweeperAtATime } from '../support/sweeper-processes.js';

// Collected only when DATABASE_URL is set (see vitest.config.ts); then an unreachable server fails.
const url = serverUrl() as string;
const BOUNCER_REASON = 'pgbouncer is not installed (apt-get install -y pgbouncer)';

async function migratedSchema(): Promise<{ schema: string; store: PgIdempotencyStore }> {
  const schema = uniqueName('sweepers');
  return { schema, store: await openPgStore(url, { schema, poolSize: 2 }) };
}

async function dropSchema(store: PgIdempotencyStore, schema: string): Promise<void> {
  await store.close();
  const { default: pg } = await import('pg');
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  await client.query(`DROP SCHEMA "${schema}" CASCADE`);
  await client.end();
}

describe('startSweeper in several processes on one PostgreSQL database', () => {
  it('sweeps every expired row with at most one process sweeping at a time', async () => {
    const { schema, store } = await migratedSchema();
    try {
      await expectOneSweeperAtATime(store, { dialect: 'pg', location: url, schema });
    } finally {
      await dropSchema(store, schema);
    }
  }, 180_000);
});

describe.skipIf(pgbouncerBinary() === undefined)(
  'startSweeper in several processes through PgBouncer in transaction mode',
  () => {
    let bouncer: Bouncer | undefined;
    afterAll(async () => bouncer?.stop());

    it('sweeps every expired row with at most one process sweeping at a time', async () => {
      bouncer = await startPgbouncer(url);
      const { schema, store } = await migratedSchema();
      try {
        await expectOneSweeperAtATime(store, { dialect: 'pg', location: bouncer.url, schema });
      } finally {
        await dropSchema(store, schema);
      }
    }, 180_000);
  },
);

if (pgbouncerBinary() === undefined) {
  console.warn(`Skipping the sweeper-through-PgBouncer test: ${BOUNCER_REASON}.`);
}
