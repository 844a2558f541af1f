import pg from 'pg';
import { describe, it } from 'vitest';
import { quoteIdentifier } from '../../src/pg/identifier.js';
import { serverUrl, uniqueName } from '../support/pg.js';
import { exerciseService, type ServerDatabase } from './server-service.js';

const url = serverUrl() ?? '';

// A database of its own, so that the service's `keys` and `payments` tables are its only ones.
async function withFreshDatabase(run: (db: ServerDatabase) => Promise<void>): Promise<void> {
  const name = uniqueName('pay');
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${quoteIdentifier(name)}`);
    const target = new URL(url);
    target.pathname = `/${name}`;
    // One client, whose end() waits for its connection to close before the database is dropped.
    const reader = new pg.Client({ connectionString: target.toString() });
    await reader.connect();
    try {
      await run({
        url: target.toString(),
        keyRow: async (key) => {
          const { rows } = await reader.query<{ status: string; lease_until: number | null }>(
            'SELECT status, lease_until FROM keys WHERE id = $1',
            [key],
          );
          const row = rows[0];
          return row && { status: row.status, leaseUntil: row.lease_until };
        },
        paymentIds: async () =>
          (await reader.query<{ id: string }>('SELECT id FROM payments')).rows.map((row) => row.id),
      });
    } finally {
      await reader.end();
    }
  } finally {
    await admin.query(`DROP DATABASE IF EXISTS ${quoteIdentifier(name)} WITH (FORCE)`);
    await admin.end();
  }
}

describe('npm start with IDEM_URL on PostgreSQL', () => {
  it('pays, replays, refuses another body (422) and a duplicate in flight (409); a kill -9 inside the transaction charges once after the lease', async () => {
    await withFreshDatabase((db) => exerciseService(db));
  }, 180_000);
});
