// Usage: node restart.mjs write|read <file>
// `write` stores answers through openSqliteStore and through a store over the application's own
// drizzle database, then ends; `read`, a new process, finds them in the file. Under drizzle 1.0,
// drizzle(client) opens a temporary database instead: the store refuses it.
import Database from 'better-sqlite3';
import { UnrecognisedDatabaseError } from 'drizzle-idempotency';
import { openSqliteStore, SqliteIdempotencyStore } from 'drizzle-idempotency/sqlite';
import { drizzle } from 'drizzle-orm/better-sqlite3';

const [mode, file] = process.argv.slice(2);
if (file === undefined) throw new Error('usage: restart.mjs write|read <file>');
const check = (ok, what) => {
  if (!ok) throw new Error(`restart: ${what}`);
};

if (mode === 'write') {
  const opened = openSqliteStore(file);
  check(opened.reserve('opened', 'd', 4e9), 'openSqliteStore reserves a new key');
  check(opened.finish('opened', 'd', { receipt: 1 }), 'openSqliteStore records the answer');
  opened.close();
  const client = new Database(file);
  const own = new SqliteIdempotencyStore(drizzle({ client }));
  check(own.reserve('own', 'd', 4e9), 'a store over drizzle({ client }) reserves a new key');
  check(own.finish('own', 'd', { receipt: 2 }), 'a store over drizzle({ client }) records it');
  client.close();
  const stray = new Database(file);
  try {
    new SqliteIdempotencyStore(drizzle(stray));
    check(false, 'a store over drizzle(client) must be refused');
  } catch (error) {
    check(error instanceof UnrecognisedDatabaseError, `drizzle(client) refused with ${error}`);
  } finally {
    stray.close();
  }
  console.log('   wrote two answers; drizzle(client) refused with UnrecognisedDatabaseError');
} else if (mode === 'read') {
  const store = openSqliteStore(file);
  const opened = JSON.stringify(store.fetch('opened', 0));
  const own = JSON.stringify(store.fetch('own', 0));
  store.close();
  check(opened === '{"receipt":1}', `the answer of openSqliteStore after a restart: ${opened}`);
  check(own === '{"receipt":2}', `the answer of the own-database store after a restart: ${own}`);
  console.log('   both answers read back from the file by a new process');
} else {
  throw new Error(`unknown mode ${mode}`);
}
