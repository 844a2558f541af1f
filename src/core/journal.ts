/** One migration as drizzle's `readMigrationFiles` reads it from the committed folder. */
export interface MigrationFile {
  /** The statements of the file, split at drizzle-kit's breakpoints. */
  readonly sql: readonly string[];
  /** The SHA-256 of the file, as drizzle records it. */
  readonly hash: string;
  /** The `when` of the migration in drizzle-kit's journal: its identity in our journal. */
  readonly folderMillis: number;
}

/** A row of a migrations journal (drizzle's layout, kept by ours too). */
export interface JournalRow {
  readonly hash: string;
  readonly created_at: number | string | null;
}

/**
 * The migrations not yet recorded in the library's journal, in the order they must run. A
 * migration is recorded by its `created_at` (drizzle-kit's `when`), so a journal listing newer or
 * older foreign entries never hides one of ours.
 *
 * @param migrations - the committed migrations, oldest first
 * @param applied - the rows of the library's own journal
 */
export function pendingMigrations<M extends MigrationFile>(
  migrations: readonly M[],
  applied: readonly JournalRow[],
): M[] {
  const done = new Set(applied.map((row) => Number(row.created_at)));
  return migrations.filter((migration) => !done.has(migration.folderMillis));
}

/**
 * The rows a database made by drizzle-idempotency 0.1.0 holds for our migrations in drizzle's
 * `__drizzle_migrations`: those whose hash is the hash of one of our files. The application's own
 * rows there never match and are left alone.
 *
 * @param migrations - the committed migrations
 * @param legacy - the rows of `__drizzle_migrations`
 */
export function legacyJournalRows(
  migrations: readonly MigrationFile[],
  legacy: readonly JournalRow[],
): MigrationFile[] {
  const hashes = new Set(legacy.map((row) => row.hash));
  return migrations.filter((migration) => hashes.has(migration.hash));
}
