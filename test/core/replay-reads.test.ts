import { PGlite } from '@electric-sql/pglite';
import { createClient } from '@libsql/client';
import Database from 'better-sqlite3';
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { LeasedIdempotencyStore } from '../../src/core/store.js';
import { openLibsqlStore } from '../../src/libsql/index.js';
import { applyPgMigrations, PgIdempotencyStore } from '../../src/pg/index.js';
import { openSqliteStore } from '../../src/sqlite/index.js';
import { fileUrl } from '../support/libsql-harness.js';
import { finishedKey, httpReplays, REPLAY_DIGEST, storeReplays } from '../support/replays.js';
import { freshDbPath, tempDir } from '../support/temp.js';

const dir = tempDir('idem-engine-replay-');
const lease = { expires: 100, now: 3, leaseSeconds: 30 };

interface Opened {
  readonly store: LeasedIdempotencyStore<unknown>;
  close(): Promise<void>;
}

/** Another connection to the same file, through the same SQLite library as the store's. */
interface Other {
  /** Takes the file's write lock (`BEGIN IMMEDIATE`) until `unlock`. */
  lock(): Promise<void>;
  unlock(): Promise<void>;
  /** `PRAGMA data_version`: it changes when another connection commits a change to the file. */
  version(): Promise<number>;
  close(): Promise<void>;
}

// Within one process, a SQLite library sees the locks of its own connections only (POSIX locks
// belong to the process), so the other connection goes through the store's own library.
function betterSqliteOther(path: string): Other {
  const other = new Database(path);
  return {
    lock: async () => void other.exec('BEGIN IMMEDIATE'),
    unlock: async () => void other.exec('ROLLBACK'),
    version: async () => other.pragma('data_version', { simple: true }) as number,
    close: async () => {
      if (other.inTransaction) other.exec('ROLLBACK');
      other.close();
    },
  };
}

function libsqlOther(path: string): Other {
  const watcher = createClient({ url: fileUrl(path) });
  const locker = createClient({ url: fileUrl(path) });
  let held: Awaited<ReturnType<typeof locker.transaction>> | undefined;
  return {
    lock: async () => {
      held = await locker.transaction('write');
    },
    unlock: async () => {
      await held?.rollback();
      held = undefined;
    },
    version: async () => Number((await watcher.execute('PRAGMA data_version')).rows[0]?.[0]),
    close: async () => {
      held?.close();
      locker.close();
      watcher.close();
    },
  };
}

// A busy timeout of 0: a statement that needs the write lock while another connection holds it
// fails at once with SQLITE_BUSY instead of waiting for it.
const files: {
  name: string;
  open(path: string): Promise<Opened>;
  other(path: string): Other;
}[] = [
  {
    name: 'better-sqlite3',
    open: async (path) => {
      const store = openSqliteStore(path, { busyTimeoutMs: 0 });
      return { store, close: async () => store.close() };
    },
    other: betterSqliteOther,
  },
  {
    name: 'libSQL',
    open: async (path) => {
      const store = await openLibsqlStore(fileUrl(path), { busyTimeoutMs: 0 });
      return { store, close: () => store.close() };
    },
    other: libsqlOther,
  },
];

// SQLite has no row versions to look at. What a write cannot do without is the file's write lock,
// and what it leaves behind is a new `data_version` for every other connection: a second
// connection holds the lock while the replays run, and reads the version before and after.
for (const file of files) {
  describe(`a replay reads, never writes: ${file.name}`, () => {
    let opened: Opened;
    let other: Other;
    beforeEach(async () => {
      const path = freshDbPath(dir);
      opened = await file.open(path);
      other = file.other(path);
    });
    afterEach(async () => {
      await other.close();
      await opened.close();
    });

    it('the retry of a finished key and another payload need neither the write lock nor a commit', async () => {
      const { store } = opened;
      await finishedKey(store, 'k');
      // The measure can fail: a commit of the store's shows in the version.
      const first = await other.version();
      expect((await store.acquire('warm', REPLAY_DIGEST, lease)).status).toBe('acquired');
      const before = await other.version();
      expect(before).not.toBe(first);
      await other.lock();
      await storeReplays(store, 'k');
      // The measure can fail: a claim that writes is refused under the same lock.
      await expect(async () => store.acquire('fresh', REPLAY_DIGEST, lease)).rejects.toThrow();
      await other.unlock();
      expect(await other.version()).toBe(before);
    });

    it('HTTP replays through the layer need neither the write lock nor a commit', async () => {
      const http = httpReplays(opened.store, 'k2');
      await http.first();
      const before = await other.version();
      await other.lock();
      await http.replays();
      await expect(http.fresh('k3')).rejects.toThrow();
      await other.unlock();
      expect(await other.version()).toBe(before);
    });
  });
}

// PostgreSQL shows a write in the row's system columns: `xmin` changes with an update, `xmax`
// with the row lock an `INSERT … ON CONFLICT DO UPDATE … WHERE` takes even when it keeps the row.
describe('a replay reads, never writes: PostgreSQL (PGlite)', () => {
  let pglite: PGlite;
  let store: PgIdempotencyStore;
  const schema = 'engine_replay';
  beforeAll(async () => {
    pglite = new PGlite();
    const db = drizzlePglite({ client: pglite });
    await applyPgMigrations(db, { schema });
    store = new PgIdempotencyStore(db, { schema });
  }, 120_000);
  afterAll(async () => {
    await pglite.close();
  });

  async function version(id: string): Promise<unknown> {
    const { rows } = await pglite.query(
      `SELECT xmin::text AS xmin, xmax::text AS xmax FROM ${schema}.keys WHERE id = $1`,
      [id],
    );
    expect(rows).toHaveLength(1);
    return rows[0];
  }

  it('the retry of a finished key and another payload leave the row untouched', async () => {
    await finishedKey(store, 'k');
    const done = await version('k');
    await storeReplays(store, 'k');
    expect(await version('k')).toEqual(done);
    // The measure can fail: a write that changes nothing still shows.
    await pglite.query(`UPDATE ${schema}.keys SET id = id WHERE id = 'k'`);
    expect(await version('k')).not.toEqual(done);
  });

  it('HTTP replays through the layer leave the row untouched', async () => {
    const http = httpReplays(store, 'k2');
    await http.first();
    const stored = await version('k2');
    await http.replays();
    expect(await version('k2')).toEqual(stored);
  });
});
