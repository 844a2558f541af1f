import { sql } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/mysql2';
import mysql from 'mysql2/promise';
import { afterEach, describe, expect, it } from 'vitest';
import { InvalidFingerprintError, InvalidKeyError } from '../../src/index.js';
import { ER_LOCK_DEADLOCK, mysqlErrno } from '../../src/mysql/errors.js';
import {
  applyMysqlMigrations,
  MYSQL_MAX_TEXT_BYTES,
  MysqlIdempotencyStore,
  retryDeadlocks,
} from '../../src/mysql/index.js';
import {
  freshMysqlDatabase,
  type MysqlDatabase,
  mysqlUrl,
  readMysqlRows,
  seedMysqlRows,
} from '../support/mysql.js';

// Collected only when MYSQL_URL is set (see vitest.config.ts); then an unreachable server fails.
const url = mysqlUrl() as string;

let target: MysqlDatabase;
const pools: mysql.Pool[] = [];
afterEach(async () => {
  await Promise.all(pools.splice(0).map((pool) => pool.end()));
  await target.drop();
});

/** A pool of one connection whose session runs `setup` first (sql_mode, lock wait timeout). */
function pool(setup: string): mysql.Pool {
  const created = mysql.createPool({ uri: target.url, connectionLimit: 1 });
  created.pool.on('connection', (connection) => {
    connection.query(setup, () => undefined);
  });
  pools.push(created);
  return created;
}

async function migrated(): Promise<MysqlDatabase> {
  const database = await freshMysqlDatabase(url, 2);
  await applyMysqlMigrations(database.db);
  return database;
}

const done = (id: string, expires: number) => ({
  id,
  fingerprint: 'f',
  status: 'done',
  response: '{"r":1}',
  expires,
});

describe('MySQL isolation traps', () => {
  it('keys that differ by case or trailing spaces are different keys', async () => {
    target = await migrated();
    const store = new MysqlIdempotencyStore(target.db);
    for (const key of ['k', 'K', 'k ', 'k  ', ' k', 'k\t']) {
      expect(await store.reserve(key, `d-${key}`, 10)).toBe(true);
    }
    expect(await store.finish('k ', 'd-k ', { spaced: true })).toBe(true);
    expect(await store.get('k')).toMatchObject({ status: 'pending', fingerprint: 'd-k' });
    expect(await store.fetch('k ', 0)).toEqual({ spaced: true });
    expect(await store.fetch('K', 0)).toBeNull();
    // A fingerprint is compared as bytes too: another case is another request.
    expect(await store.finish('K', 'd-k', { r: 1 })).toBe(false);
    expect((await readMysqlRows(target.db)).map((row) => row.id)).toEqual([
      ' k',
      'K',
      'k',
      'k\t',
      'k ',
      'k  ',
    ]);
  });

  it('keeps hostile keys and fingerprints as given, and the table with them', async () => {
    target = await migrated();
    const store = new MysqlIdempotencyStore(target.db);
    const hostile = [
      "'; DROP TABLE `keys`; --",
      '\\',
      "\\'",
      '`',
      '%',
      '_',
      '"',
      '\u00a0',
      'é',
      'e\u0301',
      '\u{1F600}',
      '\uFFFF',
      'CHAR(0)',
      '0x00',
    ];
    for (const key of hostile) {
      expect(await store.reserve(key, key, 10)).toBe(true);
      expect(await store.finish(key, key, { key })).toBe(true);
    }
    for (const key of hostile) {
      expect(await store.fetch(key, 0)).toEqual({ key });
      expect(await store.get(key)).toMatchObject({ key, fingerprint: key });
    }
    // LIKE wildcards and escapes match nothing but themselves.
    expect(await store.fetch('%%', 0)).toBeNull();
    expect(await store.reserve('a', 'd', 1)).toBe(true);
    expect(await store.finish('_', 'd', 1)).toBe(false);
    expect((await readMysqlRows(target.db)).map((row) => row.id).sort()).toEqual(
      [...hostile, 'a'].sort(),
    );
  });

  it('never truncates a key or a fingerprint, even on a session without strict sql_mode', async () => {
    target = await migrated();
    const lax = new MysqlIdempotencyStore(drizzle({ client: pool("SET SESSION sql_mode = ''") }));
    const [mode] = (await lax.db.execute(sql`SELECT @@SESSION.sql_mode AS mode`)) as unknown as [
      { mode: string }[],
    ];
    expect(mode[0]?.mode).toBe('');
    const longest = `${'é'.repeat((MYSQL_MAX_TEXT_BYTES - 2) / 2)}ab`;
    const tooLong = `${longest.slice(0, -1)}€`;
    expect(Buffer.byteLength(longest)).toBe(MYSQL_MAX_TEXT_BYTES);
    expect(Buffer.byteLength(tooLong)).toBe(MYSQL_MAX_TEXT_BYTES + 2);
    await expect(lax.reserve(tooLong, 'd', 10)).rejects.toBeInstanceOf(InvalidKeyError);
    await expect(lax.reserve('k', `d${tooLong}`, 10)).rejects.toBeInstanceOf(
      InvalidFingerprintError,
    );
    await expect(lax.finish(tooLong, 'd', 1)).rejects.toBeInstanceOf(InvalidKeyError);
    await expect(lax.get(tooLong)).rejects.toBeInstanceOf(InvalidKeyError);
    expect(await readMysqlRows(target.db)).toEqual([]);
    expect(await lax.reserve(longest, longest, 10)).toBe(true);
    expect(await lax.get(longest)).toMatchObject({ key: longest, fingerprint: longest });
  });

  it('purge and sweep skip rows another transaction holds instead of waiting for them', async () => {
    target = await migrated();
    await seedMysqlRows(target.db, [done('a', 1), done('b', 1), done('c', 1)]);
    // Every session below gives up after 1 s on a lock: a purge that waited on the foreign
    // transaction would fail instead of passing.
    const store = new MysqlIdempotencyStore(
      drizzle({ client: pool('SET SESSION innodb_lock_wait_timeout = 1') }),
    );
    const writer = new MysqlIdempotencyStore(
      drizzle({ client: pool('SET SESSION innodb_lock_wait_timeout = 1') }),
    );
    const foreign = await mysql.createConnection(target.url);
    try {
      await foreign.query('BEGIN');
      await foreign.query("SELECT id FROM `keys` WHERE id = 'b' FOR UPDATE");
      expect(await store.purge(5, 100)).toEqual(['a', 'c']);
      // Writers of other keys go on while the foreign transaction holds its row.
      expect(await writer.reserve('new', 'd', 9)).toBe(true);
      expect(await writer.finish('new', 'd', { r: 2 })).toBe(true);
      expect(await store.sweepBatch(5, 100)).toBe(0);
      await foreign.query('COMMIT');
      expect(await store.purge(5, 100)).toEqual(['b']);
    } finally {
      await foreign.end();
    }
    expect((await readMysqlRows(target.db)).map((row) => row.id)).toEqual(['new']);
  });

  it('runs a deadlock victim again, and surfaces any other error', async () => {
    target = await migrated();
    await seedMysqlRows(target.db, [done('x', 1), done('y', 1)]);
    const [a, b] = [
      await mysql.createConnection(target.url),
      await mysql.createConnection(target.url),
    ];
    let held = 0;
    let release: () => void = () => undefined;
    const bothHold = new Promise<void>((resolve) => {
      release = resolve;
    });
    const attempts = { a: 0, b: 0 };
    // Each side locks its first row, waits until the other holds its own, then asks for the
    // other's: a lock cycle InnoDB breaks by rolling one side back.
    const side = (connection: mysql.Connection, name: 'a' | 'b', first: string, second: string) =>
      retryDeadlocks(async () => {
        attempts[name] += 1;
        await connection.query('BEGIN');
        try {
          await connection.query('SELECT id FROM `keys` WHERE id = ? FOR UPDATE', [first]);
          if (attempts[name] === 1) {
            held += 1;
            if (held === 2) release();
            await bothHold;
          }
          await connection.query('SELECT id FROM `keys` WHERE id = ? FOR UPDATE', [second]);
          await connection.query('UPDATE `keys` SET expires = expires + 1 WHERE id = ?', [second]);
          await connection.query('COMMIT');
        } catch (error) {
          await connection.query('ROLLBACK');
          throw error;
        }
      });
    try {
      await Promise.all([side(a, 'a', 'x', 'y'), side(b, 'b', 'y', 'x')]);
    } finally {
      await a.end();
      await b.end();
    }
    expect(attempts.a + attempts.b).toBe(3);
    expect((await readMysqlRows(target.db)).map((row) => row.expires)).toEqual([2, 2]);

    let calls = 0;
    const duplicate = await retryDeadlocks(async () => {
      calls += 1;
      await target.pool.query(
        "INSERT INTO `keys` (id, fingerprint, status, expires) VALUES ('x', 'f', 'done', 1)",
      );
    }).catch((error: unknown) => error);
    expect(calls).toBe(1);
    expect(mysqlErrno(duplicate)).not.toBe(ER_LOCK_DEADLOCK);
    expect(mysqlErrno(duplicate)).toBe(1062);
  });
});
