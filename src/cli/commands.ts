import { formatPrometheusStats } from '../observe/prometheus.js';
import { type CliIo, writeJson } from './io.js';
import { describeLocation, type StoreLocation } from './location.js';
import { withStore } from './open-store.js';

/** Options of every command: where its store is. */
export interface LocatedOptions {
  readonly location: StoreLocation;
}

/** Options of the commands that read or delete at a moment: the store, `--now`, `--json`. */
export interface TimedOptions extends LocatedOptions {
  readonly now: number;
  readonly json?: boolean;
}

/** `--limit` on top of {@link TimedOptions}. */
export interface ListOptions extends TimedOptions {
  readonly limit: number;
}

function writeIds(io: CliIo, ids: readonly string[], json: boolean | undefined): void {
  if (json) writeJson(io.stdout, { ids });
  else for (const id of ids) io.stdout.write(`${id}\n`);
}

/**
 * `idem migrate`: creates the SQLite file or the PostgreSQL schema, the table and its index, or
 * brings them up to date.
 */
export async function migrateCommand(io: CliIo, options: LocatedOptions): Promise<void> {
  await withStore(options.location, true, async () => undefined);
  io.stdout.write(`${describeLocation(options.location)}: keys table up to date\n`);
}

/** Options of `idem stats`: {@link TimedOptions} plus `--prometheus`. */
export interface StatsOptions extends TimedOptions {
  readonly prometheus?: boolean;
}

/** `idem stats`: the counts by status and the backlog at `now`. */
export async function statsCommand(io: CliIo, options: StatsOptions): Promise<void> {
  const stats = await withStore(options.location, false, async (store) => store.stats(options.now));
  if (options.prometheus) {
    io.stdout.write(formatPrometheusStats(stats));
    return;
  }
  if (options.json) {
    writeJson(io.stdout, { ...stats, now: options.now });
    return;
  }
  io.stdout.write(
    [
      `pending       ${stats.pending}`,
      `done          ${stats.done}`,
      `expired       ${stats.expired}  (done, expires <= now: the backlog a sweep deletes)`,
      `stalePending  ${stats.stalePending}  (pending, expires <= now: never deleted, look at them)`,
      '',
    ].join('\n'),
  );
}

/** `idem expired`: the ids a purge would delete, ascending. */
export async function expiredCommand(io: CliIo, options: ListOptions): Promise<void> {
  const ids = await withStore(options.location, false, async (store) =>
    store.expired(options.now, options.limit),
  );
  writeIds(io, ids, options.json);
}

/** `idem purge`: one batch of at most `--limit` rows, ascending by id. */
export async function purgeCommand(io: CliIo, options: ListOptions): Promise<void> {
  const ids = await withStore(options.location, false, async (store) =>
    store.purge(options.now, options.limit),
  );
  writeIds(io, ids, options.json);
}
