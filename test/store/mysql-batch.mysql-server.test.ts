import { drizzle } from 'drizzle-orm/mysql2';
import {
  applyMysqlMigrations,
  MysqlIdempotencyStore,
  openMysqlStore,
} from '../../src/mysql/index.js';
import { freshMysqlDatabase, mysqlUrl, readMysqlRows } from '../support/mysql.js';
import { type BatchingStoreDatabase, describeBatchingStore } from './batching-store-suite.js';

// Collected only when MYSQL_URL is set (see vitest.config.ts); then an unreachable server fails.
const url = mysqlUrl() as string;

// The batching store's statements through mysql2, or through drizzle: with a logger, the
// single-row statements go through drizzle too. The plain store and the test's reads use mysql2.
const openThrough =
  (path: 'mysql2' | 'drizzle') =>
  async (): Promise<BatchingStoreDatabase<MysqlIdempotencyStore<unknown>>> => {
    const database = await freshMysqlDatabase(url, 4);
    await applyMysqlMigrations(database.db);
    const db =
      path === 'mysql2'
        ? database.db
        : drizzle({ client: database.pool, logger: { logQuery: () => undefined } });
    const store = new MysqlIdempotencyStore(db, { batch: true });
    return {
      store,
      plain: new MysqlIdempotencyStore(database.db),
      rows: () => readMysqlRows(database.db),
      refuseLongAnswers: async () => {
        await database.pool.query(
          'ALTER TABLE `keys` ADD CONSTRAINT short_answer CHECK (char_length(response) < 40)',
        );
      },
      drop: async () => {
        await store.close();
        await database.drop();
      },
    };
  };

describeBatchingStore<MysqlIdempotencyStore<unknown>>({
  name: 'MySQL',
  paths: {
    'with statements through mysql2': openThrough('mysql2'),
    'with statements through drizzle': openThrough('drizzle'),
  },
  // A claim reads its key first, then inserts it as the read is answered.
  claimStart: 'gets',
  refusal: { field: 'sqlState', state: '23000' },
  empty: async () => {
    const database = await freshMysqlDatabase(url, 1);
    return {
      store: (options) => new MysqlIdempotencyStore(database.db, options),
      drop: () => database.drop(),
    };
  },
  openFromUrl: async () => {
    const database = await freshMysqlDatabase(url, 1);
    const store = await openMysqlStore(database.url, { batch: true });
    return {
      store,
      drop: async () => {
        await store.close();
        await database.drop();
      },
    };
  },
});
