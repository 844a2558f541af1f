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
      `lapsed        ${stats.lapsed}  (pending, lease over: the next retry takes it over)`,
      `unrecorded    ${stats.unrecorded}  (pending, ran but not recorded: release by hand)`,
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

/** The flags of `idem pending`. */
export interface PendingOptions extends TimedOptions {
  readonly limit: number;
  readonly stale?: boolean;
}

function seconds(value: number): string {
  return `${Math.round(value * 10) / 10}s`;
}

/**
 * `idem pending`: the pending rows with their lease state, ascending by key; `--json` prints one
 * line holding an array of objects.
 */
export async function pendingCommand(io: CliIo, options: PendingOptions): Promise<void> {
  const rows = await withStore(options.location, false, async (store) =>
    store.pendingKeys({ now: options.now, stale: options.stale ?? false, limit: options.limit }),
  );
  if (options.json) {
    writeJson(io.stdout, rows);
    return;
  }
  for (const row of rows) {
    const lease =
      row.leaseUntil === null
        ? 'no lease'
        : row.leaseUntil > options.now
          ? `lease ends in ${seconds(row.leaseUntil - options.now)}`
          : `lease ended ${seconds(options.now - row.leaseUntil)} ago`;
    io.stdout.write(
      `${row.key}  ${row.state}  token ${row.attempt}  ${lease}  expires in ${seconds(row.expires - options.now)}\n`,
    );
  }
}

/** The arguments and flags of `idem release`. */
export interface ReleaseOptions extends LocatedOptions {
  readonly key: string;
  readonly yes?: boolean;
  readonly fingerprint?: string;
}

/**
 * `idem release <key> --yes`: deletes one pending row, whatever its lease. Without `--yes` it
 * changes nothing and says so (exit 2). A done row, a missing key or another fingerprint changes
 * nothing (exit 1).
 *
 * @returns the exit code: 0 released, 1 refused, 2 not confirmed
 */
export async function releaseCommand(io: CliIo, options: ReleaseOptions): Promise<number> {
  if (!options.yes) {
    io.stderr.write(
      `idem: release deletes the pending row of ${JSON.stringify(options.key)}, and a retry then runs its work again; add --yes to confirm\n`,
    );
    return 2;
  }
  const result = await withStore(options.location, false, async (store) =>
    store.releasePending(options.key, options.fingerprint),
  );
  const key = JSON.stringify(options.key);
  const messages = {
    released: undefined,
    missing: `no row with the key ${key}`,
    done: `${key} is done: its answer is kept until it expires, and only a sweep deletes it`,
    mismatch:
      options.fingerprint === undefined
        ? `${key} is not pending`
        : `${key} is pending with another fingerprint than ${JSON.stringify(options.fingerprint)}`,
  } as const;
  const message = messages[result];
  if (message === undefined) {
    io.stdout.write(`released ${key}\n`);
    return 0;
  }
  io.stderr.write(`idem: ${message}; nothing changed\n`);
  return 1;
}
