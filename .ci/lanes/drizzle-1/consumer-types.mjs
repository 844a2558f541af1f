// Typechecks a consumer of every store and adapter with skipLibCheck: false, as a strict
// application would, and fails on any error in the consumer or in drizzle-idempotency's own
// declarations. Errors inside other packages' declarations are counted and printed, not judged.
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const dir = join(process.cwd(), 'consumer');
mkdirSync(dir, { recursive: true });
writeFileSync(
  join(dir, 'tsconfig.json'),
  JSON.stringify({
    compilerOptions: {
      module: 'nodenext',
      moduleResolution: 'nodenext',
      target: 'ES2022',
      strict: true,
      noEmit: true,
      skipLibCheck: false,
      types: ['node'],
    },
    files: ['consumer.ts'],
  }),
);
writeFileSync(
  join(dir, 'consumer.ts'),
  `import Database from 'better-sqlite3';
import { createClient } from '@libsql/client';
import { PGlite } from '@electric-sql/pglite';
import { drizzle as sqliteDrizzle } from 'drizzle-orm/better-sqlite3';
import { drizzle as libsqlDrizzle } from 'drizzle-orm/libsql';
import { drizzle as pgliteDrizzle } from 'drizzle-orm/pglite';
import { type IdempotencyStore, UnrecognisedDatabaseError } from 'drizzle-idempotency';
import { applySqliteMigrations, keys, openSqliteStore, SqliteIdempotencyStore } from 'drizzle-idempotency/sqlite';
import { applyLibsqlMigrations, LibsqlIdempotencyStore } from 'drizzle-idempotency/libsql';
import { applyPgMigrations, PgIdempotencyStore, pgKeysTable } from 'drizzle-idempotency/pg';
import { expressIdempotency } from 'drizzle-idempotency/express';
import { makeIdempotent } from 'drizzle-idempotency/function';

export const schema = { keys, renamed: pgKeysTable('idem_keys') };
const sqlite = sqliteDrizzle({ client: new Database('consumer.db') });
applySqliteMigrations(sqlite);
export const own: IdempotencyStore<{ receipt: number }> = new SqliteIdempotencyStore<{ receipt: number }>(sqlite);
export const opened = openSqliteStore<{ receipt: number }>('consumer.db');
const libsql = libsqlDrizzle({ client: createClient({ url: 'file:consumer-libsql.db' }) });
await applyLibsqlMigrations(libsql);
export const viaLibsql = new LibsqlIdempotencyStore(libsql);
const pglite = pgliteDrizzle({ client: new PGlite() });
await applyPgMigrations(pglite);
export const viaPg = new PgIdempotencyStore(pglite);
export const middleware = expressIdempotency(own, { ttlSeconds: 60 });
export const charge = makeIdempotent(async (amount: number) => ({ amount }), { store: viaPg, key: (amount) => String(amount) });
export const refused = (error: unknown) => error instanceof UnrecognisedDatabaseError;
`,
);
let output = '';
try {
  execFileSync(
    process.execPath,
    [join('..', 'node_modules', 'typescript', 'bin', 'tsc'), '-p', '.'],
    {
      cwd: dir,
      encoding: 'utf8',
    },
  );
} catch (error) {
  output = `${error.stdout ?? ''}${error.stderr ?? ''}`;
}
const errors = output.split('\n').filter((line) => /error TS\d+/.test(line));
const ours = errors.filter(
  (line) => line.startsWith('consumer.ts') || line.includes('node_modules/drizzle-idempotency/'),
);
const others = errors.length - ours.length;
console.log(
  `   ${errors.length} errors: ${ours.length} in the consumer or drizzle-idempotency, ${others} in other packages' declarations`,
);
for (const line of errors) console.log(`   ${line}`);
if (ours.length > 0) process.exit(1);
