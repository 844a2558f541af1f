import {
  addedColumn,
  type JournalRow,
  legacyJournalRows,
  type MigrationFile,
  pendingMigrations,
} from './journal.js';
import {
  DEFAULT_TABLE_NAME,
  LEGACY_MIGRATIONS_TABLE,
  migrationsTableName,
  renameMigrationStatement,
} from './table-name.js';

/**
 * The statements a dialect writes for the migrator, in its own statement type `S` (SQL text and
 * arguments, a drizzle `SQL`, …). Journal names come unqualified: a dialect that keeps its tables
 * in a schema qualifies them here.
 */
export interface MigrationStatements<S> {
  /** The identifier quote of the dialect's committed migration SQL. */
  readonly quote: string;
  /** Reads the columns of `table`, in order, as rows with a `name`; no rows when it is absent. */
  columns(table: string): S;
  /** Reads the `hash` and `created_at` of every row of the journal `journal`. */
  journalRows(journal: string): S;
  /** Creates the library's journal `journal`, which does not exist yet. */
  createJournal(journal: string): S;
  /** Records `migration` in the journal `journal`. */
  record(journal: string, migration: MigrationFile): S;
  /** One statement of a migration file, already rewritten for the keys table. */
  migration(sql: string): S;
  /**
   * What brings a journal made by an earlier version to today's layout, given its columns: none
   * when it is current. A pending upgrade makes the migrator run even with nothing else pending.
   */
  upgradeJournal?(journal: string, columns: readonly string[]): S[];
}

/** What the migrator runs its statements on: the database, or a locked session of it. */
export interface MigrationSession<S, Sync extends boolean> {
  /** Runs a read and answers its rows as plain objects. */
  rows(statement: S): Sync extends true ? object[] : Promise<object[]>;
  /** Runs a write. */
  exec(statement: S): Sync extends true ? void : Promise<void>;
}

/**
 * A dialect as the migrator sees it: its statements, a session on the database for the reads
 * that decide whether there is work at all, and its lock, under which that work is decided again
 * and done. `locked` gives `run` a session that only it uses while the lock is held (a
 * transaction, a named lock on one connection, or a batch collected and sent atomically).
 */
export interface MigrationDialect<S, Sync extends boolean> extends MigrationStatements<S> {
  /** The session the first, unlocked check runs on. */
  readonly session: MigrationSession<S, Sync>;
  /** Runs `run` holding the dialect's migrations lock. */
  locked(
    run: (session: MigrationSession<S, Sync>) => Sync extends true ? void : Promise<void>,
  ): Sync extends true ? void : Promise<void>;
}

/** What one migration run applies: the keys table's name and the migrations it should have. */
export interface MigrationPlan {
  /** The keys table, already checked by `assertTableName`. */
  readonly table: string;
  /** The migrations to apply, oldest first: all committed ones, or a profile of them. */
  readonly migrations: readonly MigrationFile[];
  /** Every committed migration of the dialect, whose 0.1.0 records are carried over. */
  readonly committed: readonly MigrationFile[];
}

/** A step of a migration algorithm: a read whose rows it waits for, or a write. */
type MigrationStep<S> = { readonly read: S } | { readonly write: S };

/**
 * An algorithm over a database written once as a generator of steps, so that synchronous and
 * asynchronous drivers run the same decisions (see {@link runSync} and {@link runAsync}).
 */
export type MigrationSteps<S, R> = Generator<MigrationStep<S>, R, object[] | undefined>;

type Steps<S, R> = MigrationSteps<S, R>;

/** The step that reads `statement`: `yield* read(statement)` is its rows. */
export function* read<S>(statement: S): Steps<S, object[]> {
  return (yield { read: statement }) ?? [];
}

interface Journal {
  readonly rows: readonly JournalRow[];
  readonly columns: readonly string[];
}

// A journal, ours or drizzle's: `undefined` when there is no such table. A table of that name
// without the journal's columns has no rows to offer (the adoption checks refuse it as ours).
function* readJournal<S>(
  dialect: MigrationStatements<S>,
  table: string,
): Steps<S, Journal | undefined> {
  const columns = (yield* read(dialect.columns(table))).map(
    (row) => (row as { name: string }).name,
  );
  if (columns.length === 0) return undefined;
  if (!(columns.includes('hash') && columns.includes('created_at'))) return { rows: [], columns };
  return { rows: (yield* read(dialect.journalRows(table))) as JournalRow[], columns };
}

function* isUpToDate<S>(dialect: MigrationStatements<S>, plan: MigrationPlan): Steps<S, boolean> {
  const journalName = migrationsTableName(plan.table);
  const journal = yield* readJournal(dialect, journalName);
  return (
    journal !== undefined &&
    pendingMigrations(plan.migrations, journal.rows).length === 0 &&
    (dialect.upgradeJournal?.(journalName, journal.columns) ?? []).length === 0
  );
}

// What the library's journal records, as the migrator decides it: its own rows or, when it has
// no journal yet, the records 0.1.0 left in drizzle's journal (it only ever made the default
// table), which the first run carries over.
function* recordedMigrations<S>(
  dialect: MigrationStatements<S>,
  plan: MigrationPlan,
): Steps<S, { journal: Journal | undefined; carried: MigrationFile[]; recorded: JournalRow[] }> {
  const journal = yield* readJournal(dialect, migrationsTableName(plan.table));
  if (journal !== undefined) return { journal, carried: [], recorded: [...journal.rows] };
  const legacy =
    plan.table === DEFAULT_TABLE_NAME
      ? yield* readJournal(dialect, LEGACY_MIGRATIONS_TABLE)
      : undefined;
  const carried = legacyJournalRows(plan.committed, legacy?.rows ?? []);
  const recorded = carried.map((migration) => ({
    hash: migration.hash,
    created_at: migration.folderMillis,
  }));
  return { journal, carried, recorded };
}

// The statements of `migration` that would run, in order: an `ADD COLUMN` of a column the table
// already has is skipped (a table made by the application's own drizzle-kit migrations from the
// exported table has every column of the current version, and adding one twice fails).
function* effectiveStatements<S>(
  dialect: MigrationStatements<S>,
  plan: MigrationPlan,
  migration: MigrationFile,
  columns: Map<string, readonly string[]>,
): Steps<S, { statement: string; added?: { table: string; column: string } }[]> {
  const kept: { statement: string; added?: { table: string; column: string } }[] = [];
  for (const statement of migration.sql) {
    const renamed = renameMigrationStatement(statement, plan.table, dialect.quote);
    const added = addedColumn(renamed, dialect.quote);
    if (added === undefined) {
      kept.push({ statement: renamed });
      continue;
    }
    let present = columns.get(added.table);
    if (present === undefined) {
      present = (yield* read(dialect.columns(added.table))).map(
        (row) => (row as { name: string }).name,
      );
      columns.set(added.table, present);
    }
    if (!present.includes(added.column)) kept.push({ statement: renamed, added });
  }
  return kept;
}

// The work itself, decided from what the session reads. It never reads back what it wrote, so a
// batch driver may collect the writes and send them at the end, reads answered from before it.
function* applyPending<S>(
  dialect: MigrationStatements<S>,
  plan: MigrationPlan,
  guards?: Pick<BatchMigrationDialect<S>, 'unrecordedGuard'>,
): Steps<S, void> {
  const journalName = migrationsTableName(plan.table);
  const { journal, carried, recorded } = yield* recordedMigrations(dialect, plan);
  if (journal === undefined) {
    yield { write: dialect.createJournal(journalName) };
    for (const migration of carried) yield { write: dialect.record(journalName, migration) };
  } else {
    for (const statement of dialect.upgradeJournal?.(journalName, journal.columns) ?? []) {
      yield { write: statement };
    }
  }
  // The columns as they were before this run, read once per table.
  const columns = new Map<string, readonly string[]>();
  for (const migration of pendingMigrations(plan.migrations, recorded)) {
    if (guards !== undefined) yield { write: guards.unrecordedGuard(journalName, migration) };
    for (const { statement } of yield* effectiveStatements(dialect, plan, migration, columns)) {
      yield { write: dialect.migration(statement) };
    }
    yield { write: dialect.record(journalName, migration) };
  }
}

/**
 * What a read-only look at a database tells about its keys table and the library's migrations,
 * decided as the migrator decides what it would apply.
 */
export interface MigrationStatus {
  /** Whether the keys table exists. */
  readonly table: boolean;
  /** Whether the library's own journal exists (none yet on a table made by other means). */
  readonly journal: boolean;
  /** The migrations the migrator would apply, oldest first: none when the store is up to date. */
  readonly pending: readonly MigrationFile[];
  /**
   * The columns the pending migrations would add to the keys table, which it lacks. None on a
   * table made by the application's own drizzle-kit migrations from the exported table: its
   * columns are this version's, and only the journal is behind.
   */
  readonly missingColumns: readonly string[];
}

/**
 * The steps of {@link MigrationStatus}: reads only, on any session.
 *
 * @param dialect - the dialect's statements
 * @param plan - the table and the migrations it should have
 */
export function* migrationStatus<S>(
  dialect: MigrationStatements<S>,
  plan: MigrationPlan,
): Steps<S, MigrationStatus> {
  const table = (yield* read(dialect.columns(plan.table))).length > 0;
  const { journal, recorded } = yield* recordedMigrations(dialect, plan);
  const pending = pendingMigrations(plan.migrations, recorded);
  const missingColumns: string[] = [];
  if (table) {
    const columns = new Map<string, readonly string[]>();
    for (const migration of pending) {
      for (const { added } of yield* effectiveStatements(dialect, plan, migration, columns)) {
        if (added?.table === plan.table) missingColumns.push(added.column);
      }
    }
  }
  return { table, journal: journal !== undefined, pending, missingColumns };
}

/**
 * The {@link MigrationStatus} of `plan` through an asynchronous driver's reads: what every
 * asynchronous dialect's read-only migration status answers.
 *
 * @param dialect - the dialect's statements
 * @param plan - the table and the migrations it should have
 * @param session - runs reads on the database
 */
export function readMigrationStatus<S>(
  dialect: MigrationStatements<S>,
  plan: MigrationPlan,
  session: Pick<MigrationSession<S, false>, 'rows'>,
): Promise<MigrationStatus> {
  // The status steps only read: no write ever reaches `exec`.
  return runAsync(migrationStatus(dialect, plan), { ...session, exec: async () => undefined });
}

/** Runs `steps` on a synchronous session and answers what they return. */
export function runSync<S, R>(steps: Steps<S, R>, session: MigrationSession<S, true>): R {
  let step = steps.next();
  while (!step.done) {
    const { value } = step;
    if ('read' in value) step = steps.next(session.rows(value.read));
    else {
      session.exec(value.write);
      step = steps.next(undefined);
    }
  }
  return step.value;
}

/** Runs `steps` on an asynchronous session and answers what they return. */
export async function runAsync<S, R>(
  steps: Steps<S, R>,
  session: MigrationSession<S, false>,
): Promise<R> {
  let step = steps.next();
  while (!step.done) {
    const { value } = step;
    if ('read' in value) step = steps.next(await session.rows(value.read));
    else {
      await session.exec(value.write);
      step = steps.next(undefined);
    }
  }
  return step.value;
}

/**
 * Brings a database up to date on a synchronous driver: nothing is written when the journal
 * already records every migration of the plan; otherwise, holding the dialect's lock, what is
 * pending is decided again (another process may have done the work meanwhile) and applied, each
 * migration recorded in the library's journal.
 *
 * The one migration algorithm of every dialect: the journal created when missing, with the
 * records 0.1.0 left in drizzle's `__drizzle_migrations` carried over (the application's rows
 * there never match and are left alone); the pending set decided by `created_at`; every statement
 * rewritten for the keys table; and an `ADD COLUMN` skipped when the column is already there.
 *
 * @param dialect - the dialect's statements, session and lock
 * @param plan - the table and the migrations it should have
 */
export function migrateSync<S>(dialect: MigrationDialect<S, true>, plan: MigrationPlan): void {
  if (runSync(isUpToDate(dialect, plan), dialect.session)) return;
  dialect.locked((session) => runSync(applyPending(dialect, plan), session));
}

/**
 * {@link migrateSync} on an asynchronous driver.
 *
 * @param dialect - the dialect's statements, session and lock
 * @param plan - the table and the migrations it should have
 */
export async function migrateAsync<S>(
  dialect: MigrationDialect<S, false>,
  plan: MigrationPlan,
): Promise<void> {
  if (await runAsync(isUpToDate(dialect, plan), dialect.session)) return;
  await dialect.locked((session) => runAsync(applyPending(dialect, plan), session));
}

/**
 * A dialect whose driver has no interactive transaction (or none that can span an await): the
 * pending work is collected from reads made beforehand and sent as one atomic batch. Its
 * statements must include `unrecordedGuard`, which makes the loser of a race roll back whole.
 */
export interface BatchMigrationDialect<S> extends MigrationStatements<S> {
  /** Runs reads on the database. */
  rows(statement: S): Promise<object[]>;
  /** Runs `statements` atomically: all of them, or none when one fails. */
  batch(statements: readonly S[]): Promise<void>;
  /**
   * A statement that fails, and so rolls the whole batch back, when `migration` is recorded
   * already: two runs that both found it pending cannot both apply it. It goes before each
   * migration's statements.
   */
  unrecordedGuard(journal: string, migration: MigrationFile): S;
}

/**
 * {@link migrateAsync} for a batch-only driver: reads decide what is pending, then every write
 * goes in one batch. A batch that fails because another run applied the same migrations first
 * (its guard, or a table already made) leaves nothing to do, and the call returns; any other
 * failure is thrown.
 *
 * @param dialect - the dialect's statements, reads and batch
 * @param plan - the table and the migrations it should have
 */
export async function migrateInBatch<S>(
  dialect: BatchMigrationDialect<S>,
  plan: MigrationPlan,
): Promise<void> {
  const writes: S[] = [];
  // Reads go to the database; writes, which only applyPending makes, are collected.
  const session: MigrationSession<S, false> = {
    rows: (statement) => dialect.rows(statement),
    exec: async (statement) => {
      writes.push(statement);
    },
  };
  if (await runAsync(isUpToDate(dialect, plan), session)) return;
  await runAsync(applyPending(dialect, plan, dialect), session);
  try {
    await dialect.batch(writes);
  } catch (error) {
    if (await runAsync(isUpToDate(dialect, plan), session)) return;
    throw error;
  }
}
