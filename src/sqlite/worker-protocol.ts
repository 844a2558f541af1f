import type { DeploymentFinding } from '../core/deployment.js';
import { DeploymentRefusedError } from '../core/deployment.js';
import {
  DatabaseOpenError,
  IdempotencyError,
  InvalidArgumentError,
  InvalidLimitError,
  InvalidOptionError,
  InvalidTimeError,
  SchemaMismatchError,
  StoreClosedError,
} from '../core/errors.js';
import type { KeyStatementsOf } from '../core/key-store.js';

/** The name of one of the statements the worker runs. */
export type StatementName = Exclude<keyof KeyStatementsOf<'sync'>, 'readPendingOptions'>;

/** What the worker is opened with: the options of `openSqliteWorkerStore` that cross a thread. */
export interface WorkerOpenData {
  readonly path: string;
  readonly busyTimeoutMs: number | undefined;
  readonly synchronous: string | undefined;
  readonly answerCacheSize: number;
  /** The keys table's name; `undefined` for the default table. */
  readonly table: string | undefined;
}

/** One statement to run, with its arguments as the store gave them. */
export interface WorkerCall {
  readonly id: number;
  readonly name: StatementName;
  readonly args: readonly unknown[];
}

/** An error as it crosses the thread: enough to rebuild the typed error on the other side. */
export interface WireError {
  readonly name: string;
  readonly message: string;
  readonly stack: string | undefined;
  /** The error's own fields (`code`, `findings`, `path`, …), as structured clone copies them. */
  readonly fields: Record<string, unknown>;
  readonly cause: WireError | undefined;
}

/** The answer of one call. */
export type WorkerResult =
  | { readonly id: number; readonly ok: true; readonly value: unknown }
  | { readonly id: number; readonly ok: false; readonly error: WireError };

/** A message from the store to its worker: the calls of one turn. */
export interface ToWorker {
  readonly calls: readonly WorkerCall[];
}

/** A message from the worker to its store. */
export type FromWorker =
  | { readonly kind: 'ready'; readonly findings: readonly DeploymentFinding[] }
  | { readonly kind: 'failed'; readonly error: WireError }
  | {
      readonly kind: 'results';
      readonly results: readonly WorkerResult[];
      /** How many transactions of more than one call the worker has run so far. */
      readonly batches: number;
    };

/**
 * The statements that only read: the worker runs them at once unless writes wait, as
 * `GroupCommit.read` does, since a read commits nothing.
 */
export const READS: ReadonlySet<StatementName> = new Set<StatementName>([
  'pendingKeys',
  'fetch',
  'get',
  'expired',
  'counts',
  'stats',
  'answers',
  'stepRecords',
]);

/** Turns an error into what crosses the thread. */
export function toWire(error: unknown): WireError {
  if (!(error instanceof Error)) {
    return {
      name: 'Error',
      message: String(error),
      stack: undefined,
      fields: {},
      cause: undefined,
    };
  }
  const fields: Record<string, unknown> = {};
  for (const [field, value] of Object.entries(error)) {
    if (field !== 'cause') fields[field] = value;
  }
  return {
    name: error.name,
    message: error.message,
    stack: error.stack,
    fields,
    cause: error.cause === undefined ? undefined : toWire(error.cause),
  };
}

// The typed errors the worker can throw (opening, migrating, checking the deployment), rebuilt as
// themselves so `instanceof` and `code` hold on the store's side. Any other error (a SQLite one,
// with its `code`) comes back as an Error of the same name and fields.
const TYPED: readonly (abstract new (...args: never[]) => IdempotencyError)[] = [
  DatabaseOpenError,
  SchemaMismatchError,
  DeploymentRefusedError,
  StoreClosedError,
  InvalidOptionError,
  InvalidLimitError,
  InvalidTimeError,
  InvalidArgumentError,
  IdempotencyError,
];

/** Rebuilds an error that crossed the thread. */
export function fromWire(wire: WireError): Error {
  const error = new Error(
    wire.message,
    wire.cause === undefined ? {} : { cause: fromWire(wire.cause) },
  );
  const typed = TYPED.find((type) => type.name === wire.name);
  if (typed !== undefined) Object.setPrototypeOf(error, typed.prototype);
  error.name = wire.name;
  if (wire.stack !== undefined) error.stack = wire.stack;
  Object.assign(error, wire.fields);
  return error;
}
