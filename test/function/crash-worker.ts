// A process that applies transactional makeIdempotent calls in a loop until it is killed:
//   crash-worker.ts sqlite <file> <prefix>
//   crash-worker.ts libsql <file> <prefix>
//   crash-worker.ts pg <url> <schema> <prefix>
//   crash-worker.ts mysql <url> <prefix>
// Each call `<prefix>-<n>` writes an effect row, then lingers a moment inside the transaction, so a
// SIGKILL at a random time most often lands between the effect and the commit. Prints `go` once
// the first call has committed. On a server, prints `session <id>` for each connection it opens,
// so the test can wait for the server to finish what the dead process had already sent.
import { sql } from 'drizzle-orm';
import { makeIdempotent } from '../../src/function/index.js';

const [dialect, target, ...rest] = process.argv.slice(2);

function linger(): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1 + Math.random() * 3);
}

async function loop(call: (key: string) => Promise<unknown>, prefix: string): Promise<never> {
  await call(`${prefix}-0`);
  console.log('go');
  for (let n = 1; ; n++) await call(`${prefix}-${n}`);
}

if (dialect === 'sqlite') {
  const [prefix] = rest as [string];
  // Each dialect is loaded only when used: the process starts once per trial.
  const { openSqliteStore, sqliteTransaction } = await import('../../src/sqlite/index.js');
  const store = openSqliteStore(target as string);
  const call = makeIdempotent(
    (tx, key: string) => {
      tx.run(sql`INSERT INTO effects (key) VALUES (${key})`);
      linger();
      return { applied: key };
    },
    { transaction: sqliteTransaction(store), key: (key) => key },
  );
  await loop(call, prefix);
} else if (dialect === 'libsql') {
  const [prefix] = rest as [string];
  const [{ libsqlTransaction, openLibsqlStore }, { pathToFileURL }] = await Promise.all([
    import('../../src/libsql/index.js'),
    import('node:url'),
  ]);
  const store = await openLibsqlStore(pathToFileURL(target as string).href);
  const call = makeIdempotent(
    async (tx, key: string) => {
      await tx.run(sql`INSERT INTO effects (key) VALUES (${key})`);
      linger();
      return { applied: key };
    },
    { transaction: libsqlTransaction(store), key: (key) => key },
  );
  await loop(call, prefix);
} else if (dialect === 'mysql') {
  const [prefix] = rest as [string];
  const [{ drizzle }, { default: mysql }, { MysqlIdempotencyStore, mysqlTransaction }] =
    await Promise.all([
      import('drizzle-orm/mysql2'),
      import('mysql2/promise'),
      import('../../src/mysql/index.js'),
    ]);
  const pool = mysql.createPool({ uri: target as string, connectionLimit: 2 });
  // Written to the pipe (synchronous on Linux) before the connection runs a statement.
  pool.on('connection', (connection) => console.log(`session ${connection.threadId}`));
  const store = new MysqlIdempotencyStore(drizzle({ client: pool }));
  const call = makeIdempotent(
    async (tx, key: string) => {
      await tx.execute(sql`INSERT INTO effects (\`key\`) VALUES (${key})`);
      await tx.execute(sql`DO SLEEP(${0.001 + Math.random() * 0.003})`);
      return { applied: key };
    },
    { transaction: mysqlTransaction(store), key: (key) => key },
  );
  await loop(call, prefix);
} else {
  const [schema, prefix] = rest as [string, string];
  const [{ drizzle }, { default: pg }, { PgIdempotencyStore, pgTransaction }] = await Promise.all([
    import('drizzle-orm/node-postgres'),
    import('pg'),
    import('../../src/pg/index.js'),
  ]);
  const pool = new pg.Pool({ connectionString: target, max: 2 });
  // Written to the pipe (synchronous on Linux) before the connection runs a statement.
  pool.on('connect', (client) => console.log(`session ${pgBackendPid(client)}`));
  const store = new PgIdempotencyStore(drizzle({ client: pool }), { schema });
  const call = makeIdempotent(
    async (tx, key: string) => {
      await tx.execute(sql`INSERT INTO ${sql.identifier(schema)}.effects (key) VALUES (${key})`);
      await tx.execute(sql`SELECT pg_sleep(${0.001 + Math.random() * 0.003})`);
      return { applied: key };
    },
    {
      transaction: pgTransaction(store),
      key: (key) => key,
    },
  );
  await loop(call, prefix);
}

// node-postgres keeps the server's process id of a connection, untyped.
function pgBackendPid(client: object): number {
  return (client as { processID: number }).processID;
}
