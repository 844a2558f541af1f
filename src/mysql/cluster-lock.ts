import { randomUUID } from 'node:crypto';
import { sql } from 'drizzle-orm';
import { type AnyMysqlDatabase, queryRows } from './client.js';
import { writeHeader } from './compile.js';
import { ER_LOCK_DEADLOCK, mysqlErrno, retryDeadlocks } from './errors.js';

/** The table of the cluster-wide locks: one row per keys table, in the keys table's database. */
const CLUSTER_LOCKS_TABLE = '__idempotency_locks';

// A holder renews its lease every quarter of it; a holder gone without releasing (its process
// killed) is taken over once the lease ran out.
const LEASE_SECONDS = 60;
const RENEW_MS = (LEASE_SECONDS * 1000) / 4;
// The pause between two looks at a held lock, drawn at random below this so waiters spread out.
const POLL_MS = 100;

type Executor = Pick<AnyMysqlDatabase, 'execute'>;

/** Whether the server is a Galera cluster node, where `GET_LOCK` is node-local. */
async function isGaleraNode(db: Executor): Promise<boolean> {
  const rows = await queryRows<{ Value: string }>(db, sql`SHOW VARIABLES LIKE 'wsrep_on'`);
  return rows[0]?.Value === 'ON';
}

const now = sql`UNIX_TIMESTAMP(NOW(3))`;

// One try: takes the row when it is free or its lease ran out. On Galera a commit that loses a
// race with another node's commit to the same row fails certification (1213): a lost try.
async function tryTake(db: Executor, name: string, holder: string): Promise<boolean> {
  try {
    const result = await db.execute(
      sql`UPDATE ${sql.identifier(CLUSTER_LOCKS_TABLE)}
          SET holder = ${holder}, until = ${now} + ${LEASE_SECONDS}
          WHERE name = ${name} AND (holder IS NULL OR until < ${now})`,
    );
    return writeHeader(result).affectedRows === 1;
  } catch (error) {
    if (mysqlErrno(error) === ER_LOCK_DEADLOCK) return false;
    throw error;
  }
}

/**
 * Runs `work` holding the migrations lock of `name` across a whole Galera cluster: a row of
 * {@link CLUSTER_LOCKS_TABLE}, taken by an `UPDATE` that commits only where the row is free.
 * `GET_LOCK` is node-local, so without it instances opened on several nodes each held "the" lock
 * and each recorded the pending migrations in the journal. A row lock is no better on Galera (a
 * node's locks are its own), but a committed write is: of two nodes writing the row from the same
 * state, certification lets only the first commit, and a node that already sees the row taken
 * changes nothing. The holder renews a lease while `work` runs, so a holder killed mid-run holds
 * the lock for at most a minute. On any other server `work` runs as it is.
 *
 * @param db - the database, taking statements outside `work`'s transaction
 * @param name - what the lock is of: the keys table's name
 * @param timeoutSeconds - how long to wait for the lock
 * @param work - the migrations run
 * @throws Error when the lock stayed held for `timeoutSeconds`
 */
export async function withClusterLock<R>(
  db: Executor,
  name: string,
  timeoutSeconds: number,
  work: () => Promise<R>,
): Promise<R> {
  if (!(await isGaleraNode(db))) return work();
  const table = sql.identifier(CLUSTER_LOCKS_TABLE);
  // Nodes making the table or its row at once replicate in total order (DDL) or fail
  // certification (the row): both safe to try again.
  await retryDeadlocks(
    () =>
      db.execute(
        sql`CREATE TABLE IF NOT EXISTS ${table} (name varchar(255) NOT NULL PRIMARY KEY, holder varchar(36), until double) ENGINE=InnoDB`,
      ),
    { attempts: 20, backoffMs: 20 },
  );
  await retryDeadlocks(() => db.execute(sql`INSERT IGNORE INTO ${table} (name) VALUES (${name})`), {
    attempts: 20,
    backoffMs: 20,
  });
  const holder = randomUUID();
  const deadline = Date.now() + timeoutSeconds * 1000;
  while (!(await tryTake(db, name, holder))) {
    if (Date.now() > deadline) {
      throw new Error(`could not take the migrations lock for ${name} within ${timeoutSeconds} s`);
    }
    await new Promise((resolve) => setTimeout(resolve, Math.random() * POLL_MS));
  }
  const renew = () =>
    retryDeadlocks(() =>
      db.execute(
        sql`UPDATE ${table} SET until = ${now} + ${LEASE_SECONDS} WHERE name = ${name} AND holder = ${holder}`,
      ),
    );
  const renewal = setInterval(() => void renew().catch(() => undefined), RENEW_MS);
  renewal.unref();
  try {
    return await work();
  } finally {
    clearInterval(renewal);
    await retryDeadlocks(
      () =>
        db.execute(
          sql`UPDATE ${table} SET holder = NULL, until = NULL WHERE name = ${name} AND holder = ${holder}`,
        ),
      { attempts: 20, backoffMs: 20 },
    );
  }
}
