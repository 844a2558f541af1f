import { describe, it } from 'vitest';
import { freshMysqlDatabase, mysqlUrl } from '../support/mysql.js';
import { exerciseService } from './server-service.js';

const url = mysqlUrl() ?? '';

describe('npm start with IDEM_URL on MySQL/MariaDB', () => {
  it('pays, replays, refuses another body (422) and a duplicate in flight (409); a kill -9 inside the transaction charges once after the lease', async () => {
    const db = await freshMysqlDatabase(url, 2);
    try {
      await exerciseService({
        url: db.url,
        keyRow: async (key) => {
          const [rows] = (await db.pool.query(
            'SELECT status, lease_until FROM `keys` WHERE id = ?',
            [key],
          )) as unknown as [{ status: string; lease_until: number | null }[]];
          const row = rows[0];
          return row && { status: row.status, leaseUntil: row.lease_until };
        },
        paymentIds: async () => {
          const [rows] = (await db.pool.query('SELECT id FROM payments')) as unknown as [
            { id: string }[],
          ];
          return rows.map((row) => row.id);
        },
      });
    } finally {
      await db.drop();
    }
  }, 180_000);
});
