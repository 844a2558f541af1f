import { drizzle } from 'drizzle-orm/node-postgres';
import pg from 'pg';
import { applyPgMigrations, PgIdempotencyStore } from '../../src/pg/index.js';
import { describeConcurrency } from '../support/concurrency-suite.js';
import { freshServerSchema, readPgRows, seedPgRows, serverUrl } from '../support/pg.js';

const url = serverUrl() as string;

describeConcurrency({
  name: 'PostgreSQL',
  // Every cleaner purges, so the ids they report must be exactly the expired rows.
  sweepers: 0,
  fresh: async () => {
    const target = await freshServerSchema(url, 2);
    await applyPgMigrations(target.db, { schema: target.schema });
    const pools: pg.Pool[] = [];
    return {
      stores: (count) =>
        Promise.all(
          Array.from({ length: count }, async () => {
            const pool = new pg.Pool({ connectionString: url, max: 1 });
            pools.push(pool);
            await pool.query('SELECT 1');
            return new PgIdempotencyStore(drizzle({ client: pool }), { schema: target.schema });
          }),
        ),
      rows: () => readPgRows(target.db, target.schema),
      seed: (rows) => seedPgRows(target.db, target.schema, rows),
      drop: async () => {
        await Promise.all(pools.splice(0).map((pool) => pool.end()));
        await target.drop();
      },
    };
  },
});
