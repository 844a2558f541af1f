import { inspect } from 'node:util';
import { encryptionOf, isSealed } from '../core/encryption.js';
import { EncryptionKeyMissingError, InvalidOptionError } from '../core/errors.js';
import type { JsonValue } from '../core/json.js';
import { KeyStore, type Mode } from '../core/key-store.js';
import { releaseStuckKey } from '../core/release-stuck.js';
import { resolveUnknownOutcome } from '../core/resolve-unknown.js';
import { decodeResult } from '../core/result-encoding.js';
import { KeyStatus } from '../core/status.js';
import { parseStepRecord } from '../core/steps.js';
import type { IdempotencyRecord } from '../core/store.js';
import { fromStoredAnswer, type NotKeptReason, notKeptOf } from '../http/response.js';
import { storedId } from '../http/scope.js';
import { formatPrometheusStats } from '../observe/prometheus.js';
import { asciiJson, type CliIo, writeJson } from './io.js';
import { KEYRING_VARIABLE } from './keyring.js';
import { printableKey, printableWord, splitStoredId, terminalSafe } from './keys.js';
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

// Each id as the arguments that name it again: nothing in one can move the cursor or end a line.
function writeIds(io: CliIo, ids: readonly string[], json: boolean | undefined): void {
  if (json) writeJson(io.stdout, { ids });
  else for (const id of ids) io.stdout.write(`${printableKey(id)}\n`);
}

/** Options of `idem migrate`: the store and `--json`. */
export interface MigrateOptions extends LocatedOptions {
  readonly json?: boolean;
}

/**
 * `idem migrate`: creates the SQLite file or the PostgreSQL schema, the table and its index, or
 * brings them up to date.
 */
export async function migrateCommand(io: CliIo, options: MigrateOptions): Promise<void> {
  await withStore(options.location, 'migrate', async () => undefined);
  const store = describeLocation(options.location);
  if (options.json) writeJson(io.stdout, { store, upToDate: true });
  else io.stdout.write(`${store}: keys table up to date\n`);
}

/** Options of `idem stats`: {@link TimedOptions} plus `--prometheus`. */
export interface StatsOptions extends TimedOptions {
  readonly prometheus?: boolean;
}

/** `idem stats`: the counts by status and the backlog at `now`. */
export async function statsCommand(io: CliIo, options: StatsOptions): Promise<void> {
  const stats = await withStore(options.location, 'read', async (store) =>
    store.stats(options.now),
  );
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

/**
 * `idem expired`: the ids a purge would delete, ascending. An empty list says so on stderr, so
 * that stdout stays the list a script reads.
 */
export async function expiredCommand(io: CliIo, options: ListOptions): Promise<void> {
  const ids = await withStore(options.location, 'read', async (store) =>
    store.expired(options.now, options.limit),
  );
  writeIds(io, ids, options.json);
  if (ids.length === 0 && !options.json) {
    io.stderr.write('no expired answers: a sweep has nothing to delete now\n');
  }
}

/** `idem purge`: one batch of at most `--limit` rows, ascending by id. */
export async function purgeCommand(io: CliIo, options: ListOptions): Promise<void> {
  const ids = await withStore(options.location, 'write', async (store) =>
    store.purge(options.now, options.limit),
  );
  writeIds(io, ids, options.json);
}

/** The flags of `idem pending`. */
export interface PendingOptions extends TimedOptions {
  readonly limit: number;
  readonly stale?: boolean;
  /** `--scope S`: only the keys stored under this scope. */
  readonly scope?: string;
}

const UNITS = [
  ['d', 86_400],
  ['h', 3600],
  ['m', 60],
] as const;

/**
 * A duration as people read it: `12.5s` under a minute, else its two largest units, the smaller
 * one cut (not rounded) as a clock shows it: `14m 50s`, `2h 5m`, `2d 23h`; a zero smaller unit
 * is left out (`3d`).
 */
function humanDuration(value: number): string {
  const tenths = Math.round(value * 10) / 10;
  if (tenths < 60) return `${tenths}s`;
  const total = Math.floor(value);
  for (const [index, [unit, size]] of UNITS.entries()) {
    if (total < size) continue;
    const [smallUnit, smallSize] = UNITS[index + 1] ?? ['s', 1];
    const big = Math.floor(total / size);
    const small = Math.floor((total - big * size) / smallSize);
    return small === 0 ? `${big}${unit}` : `${big}${unit} ${small}${smallUnit}`;
  }
  return `${total}s`;
}

const seconds = humanDuration;

// A deadline seen from `now`: one still ahead reads `in 12.5s`, one behind `13.5s ago`, never a
// negative duration.
function fromNow(deadline: number, now: number): string {
  return deadline > now ? `in ${seconds(deadline - now)}` : `${seconds(now - deadline)} ago`;
}

function leaseText(leaseUntil: number | null, now: number): string {
  if (leaseUntil === null) return 'no lease';
  return leaseUntil > now
    ? `lease ends ${fromNow(leaseUntil, now)}`
    : `lease ended ${fromNow(leaseUntil, now)}`;
}

function expiresText(expires: number, now: number): string {
  return expires > now ? `expires ${fromNow(expires, now)}` : `expired ${fromNow(expires, now)}`;
}

// The name of a key's last recorded step, read as the store reads it: a record sealed under the
// store's keyring is opened first. A record this version cannot parse, or one sealed under a key
// the keyring lacks (or with no keyring set), shows no step rather than failing the whole listing;
// the text listing says why.
async function lastStepOf(
  store: object,
  key: string,
  text: string | undefined,
): Promise<{ lastStep: string | null; stepsSealed?: true }> {
  if (text === undefined) return { lastStep: null };
  try {
    const encryption = encryptionOf(store);
    if (isSealed(text) && encryption === undefined) return { lastStep: null, stepsSealed: true };
    const opened = encryption === undefined ? text : await encryption.open(key, text);
    return { lastStep: parseStepRecord(opened).steps.at(-1)?.[0] ?? null };
  } catch (error) {
    if (error instanceof EncryptionKeyMissingError) return { lastStep: null, stepsSealed: true };
    return { lastStep: null };
  }
}

/**
 * `idem pending`: the pending rows with their lease state and the last step their handler
 * recorded (see docs/steps.md), ascending by key; `--json` prints one line holding an array of
 * objects, `lastStep` `null` for a key without steps. Each key is printed as the arguments that
 * name it again, so it can be pasted after `idem show` or `idem release`.
 */
export async function pendingCommand(io: CliIo, options: PendingOptions): Promise<void> {
  const rows = await withStore(options.location, 'read', async (store, opened) => {
    const pending = await store.pendingKeys({
      now: options.now,
      stale: options.stale ?? false,
      limit: options.limit,
      ...(options.scope === undefined ? {} : { prefix: storedId(options.scope, '') }),
    });
    const steps = (await opened.recordedSteps?.(pending.map((row) => row.key))) ?? new Map();
    return Promise.all(
      pending.map(async (row) => ({
        ...row,
        ...(await lastStepOf(store, row.key, steps.get(row.key))),
      })),
    );
  });
  if (options.json) {
    writeJson(io.stdout, rows);
    return;
  }
  if (rows.length === 0) {
    const scope =
      options.scope === undefined ? '' : ` under the scope ${printableWord(options.scope)}`;
    io.stderr.write(
      options.stale
        ? `no stale pending keys${scope}: none is waiting for a person\n`
        : `no pending keys${scope}: no request is in flight\n`,
    );
    return;
  }
  for (const row of rows) {
    const step =
      row.lastStep !== null
        ? `  last step ${printableWord(row.lastStep)}`
        : row.stepsSealed === true
          ? `  steps sealed under a key ${KEYRING_VARIABLE} lacks`
          : '';
    io.stdout.write(
      `${printableKey(row.key)}  ${row.state}  token ${row.fencingToken}  ${leaseText(row.leaseUntil, options.now)}  ${expiresText(row.expires, options.now)}${step}\n`,
    );
  }
}

/** The flags of `idem show`. */
export interface ShowOptions extends TimedOptions {
  /** The stored id, scope included. */
  readonly id: string;
  /** `--body`: print the stored answer's body too. */
  readonly body?: boolean;
}

/** What `idem show` says of a stored answer. */
type AnswerSummary =
  | {
      readonly kind: 'http';
      readonly status: number;
      readonly bytes: number;
      readonly kept: boolean;
      /** Why the body was not kept; absent when it was. */
      readonly notKeptBecause?: NotKeptReason;
      readonly headers: Readonly<Record<string, string>>;
      /** The body's bytes; absent when none was kept. */
      readonly body?: Uint8Array;
    }
  | { readonly kind: 'value'; readonly bytes: number; readonly value: unknown }
  | {
      readonly kind: 'result';
      readonly bytes: number;
      /** What the function returned, as `makeIdempotent` gives it back to a retry. */
      readonly value: unknown;
      /** The stored envelope, for `--json` when the value has no JSON form of its own. */
      readonly stored: unknown;
    };

// `makeIdempotent`'s default codec stores a result in an envelope of one member, `value` (plain
// JSON) or `encoded` (a Date, a BigInt, …), or as `{}` for undefined: the caller's value is
// inside it. Anything else is a value the application stored itself.
function isResultEnvelope(response: unknown): response is JsonValue & object {
  if (typeof response !== 'object' || response === null || Array.isArray(response)) return false;
  const members = Object.keys(response);
  return (
    members.length === 0 ||
    (members.length === 1 && (members[0] === 'value' || members[0] === 'encoded'))
  );
}

function summarize(id: string, response: unknown): AnswerSummary {
  const notKept = notKeptOf(response);
  try {
    const wire = fromStoredAnswer(id, response);
    const body = wire.body ?? new Uint8Array();
    return notKept === undefined
      ? {
          kind: 'http',
          status: wire.status,
          bytes: body.length,
          kept: true,
          headers: wire.headers,
          body,
        }
      : {
          kind: 'http',
          status: wire.status,
          bytes: notKept.bytes,
          kept: false,
          notKeptBecause: notKept.reason,
          headers: wire.headers,
        };
  } catch {
    // Not an HTTP answer: a value stored by makeIdempotent or by the application.
    const bytes = Buffer.byteLength(JSON.stringify(response) ?? '', 'utf8');
    if (isResultEnvelope(response)) {
      return { kind: 'result', bytes, value: decodeResult(response), stored: response };
    }
    return { kind: 'value', bytes, value: response };
  }
}

// A result as the caller stored it: JSON when it is plain data, else as Node shows the value
// (a Date, a BigInt, undefined), which JSON has no form for.
function resultText(answer: Extract<AnswerSummary, { kind: 'result' }>): string {
  if (Object.hasOwn(answer.stored as object, 'value')) return asciiJson(answer.value);
  return terminalSafe(inspect(answer.value, { depth: null, colors: false }));
}

function bodyText(body: Uint8Array): { text: string; encoding?: 'base64' } {
  try {
    return { text: new TextDecoder('utf-8', { fatal: true }).decode(body) };
  } catch {
    return { text: Buffer.from(body).toString('base64'), encoding: 'base64' };
  }
}

function showJson(
  record: IdempotencyRecord<unknown>,
  options: ShowOptions,
): Record<string, unknown> {
  const answer = record.status === KeyStatus.done ? summarize(record.key, record.response) : null;
  let answerJson: Record<string, unknown> | null = null;
  if (answer?.kind === 'http') {
    const { body, ...rest } = answer;
    answerJson =
      options.body && body !== undefined ? { ...rest, ...bodyJson(bodyText(body)) } : rest;
  } else if (answer?.kind === 'value') {
    const { value, ...rest } = answer;
    answerJson = options.body ? { ...rest, value } : rest;
  } else if (answer?.kind === 'result') {
    const { value, stored, ...rest } = answer;
    // A plain result is the value itself; one JSON cannot hold keeps the codec's tagged form.
    const plain = Object.hasOwn(stored as object, 'value');
    answerJson = options.body
      ? {
          ...rest,
          ...(plain ? { value } : { encoded: (stored as { encoded?: unknown }).encoded ?? null }),
        }
      : rest;
  }
  return {
    key: record.key,
    status: record.status,
    fingerprint: record.fingerprint,
    expires: record.expires,
    leaseUntil: record.leaseUntil,
    fencingToken: record.fencingToken,
    unrecorded: record.unrecorded,
    answer: answerJson,
    now: options.now,
  };
}

function bodyJson(body: { text: string; encoding?: 'base64' }): Record<string, unknown> {
  return body.encoding === undefined
    ? { body: body.text }
    : { body: body.text, encoding: body.encoding };
}

const NOT_KEPT_WHY: Record<NotKeptReason, string> = {
  'too-large': 'over maxStoredBytes',
  stream: 'a stream under storeStreams: false',
  unfinished: 'the client left before its stream ended',
  'still-open': 'its stream was still open after streamRecordAfterSeconds',
};

function answerLine(answer: AnswerSummary): string {
  if (answer.kind === 'value')
    return `a stored value (not an HTTP answer), ${answer.bytes} bytes of JSON`;
  if (answer.kind === 'result')
    return `a makeIdempotent result, ${answer.bytes} bytes of JSON (--body prints the value)`;
  const type = answer.headers['content-type'];
  const kept =
    answer.notKeptBecause === undefined
      ? ''
      : `, body not kept (${NOT_KEPT_WHY[answer.notKeptBecause]})`;
  const typed = type === undefined ? '' : `, ${terminalSafe(type)}`;
  return `HTTP ${answer.status}, ${answer.bytes} bytes${typed}${kept}`;
}

/**
 * `idem show <key>`: the whole record of one key (status, lease, fencing token, fingerprint,
 * retention deadline and, once done, the stored answer's HTTP status and size), and its body with
 * `--body`. Bodies and keys are printed so that no byte of them can act on the terminal.
 *
 * @returns the exit code: 0 shown, 1 no such key
 */
export async function showCommand(io: CliIo, options: ShowOptions): Promise<number> {
  const { record, scoped } = await withStore(options.location, 'read', async (store, opened) => {
    const found = await store.get(options.id);
    // A key typed without its scope: the ids holding it under scopes tell the operator what to
    // type.
    const under =
      found === null && splitStoredId(options.id) === undefined
        ? ((await opened.scopedIds?.(options.id)) ?? [])
        : [];
    return { record: found, scoped: under };
  });
  if (record === null) {
    const key = printableKey(options.id);
    if (scoped.length === 0) {
      io.stderr.write(
        `idem: no row with the key ${key}; list the keys in flight with "idem pending", or give the scope the key was stored under with --scope SCOPE\n`,
      );
    } else {
      const scopes = scoped.map((id) => printableWord(splitStoredId(id)?.scope ?? ''));
      io.stderr.write(
        `idem: no row with the key ${key} outside a scope; it is stored under the scope(s) ${scopes.join(', ')}: type "idem show ${printableKey(scoped[0] ?? '')}"\n`,
      );
    }
    return 1;
  }
  if (options.json) {
    writeJson(io.stdout, showJson(record, options));
    return 0;
  }
  const { now } = options;
  const state =
    record.status === KeyStatus.done
      ? 'done'
      : `pending (${record.unrecorded ? 'unrecorded: ran, answer not recorded; release by hand' : record.leaseUntil === null ? 'unleased' : record.leaseUntil > now ? 'live' : 'lapsed'})`;
  const pending = record.status !== KeyStatus.done;
  const lease =
    record.leaseUntil === null || !pending
      ? 'none'
      : record.leaseUntil > now
        ? `ends ${fromNow(record.leaseUntil, now)}`
        : `ended ${fromNow(record.leaseUntil, now)}`;
  const replayed = pending
    ? ''
    : record.expires > now
      ? ' (replayed until then)'
      : ' (no longer replayed; a sweep deletes it)';
  const lines = [
    `key          ${printableKey(record.key)}`,
    `status       ${state}`,
    `lease        ${lease}`,
    `token        ${record.fencingToken}`,
    `fingerprint  ${printableWord(record.fingerprint)}`,
    `retention    ${expiresText(record.expires, now)}${replayed}`,
  ];
  const answer =
    record.status === KeyStatus.done ? summarize(record.key, record.response) : undefined;
  lines.push(`answer       ${answer === undefined ? 'none yet (pending)' : answerLine(answer)}`);
  io.stdout.write(`${lines.join('\n')}\n`);
  if (!options.body || answer === undefined) return 0;
  if (answer.kind === 'value') {
    io.stdout.write(`\n${asciiJson(answer.value)}\n`);
  } else if (answer.kind === 'result') {
    io.stdout.write(`\n${resultText(answer)}\n`);
  } else if (answer.body !== undefined) {
    const body = bodyText(answer.body);
    const text = body.encoding === undefined ? terminalSafe(body.text) : body.text;
    const label = body.encoding === undefined ? '' : '(binary, base64)\n';
    io.stdout.write(`\n${label}${text}${text.endsWith('\n') ? '' : '\n'}`);
  }
  return 0;
}

/** The arguments and flags of `idem release`. */
export interface ReleaseOptions extends LocatedOptions {
  /** The stored id, scope included. */
  readonly id: string;
  /** The moment the lease is judged at. */
  readonly now: number;
  readonly yes?: boolean;
  /** Release even a key whose owner holds a live lease. */
  readonly force?: boolean;
  readonly fingerprint?: string;
  readonly json?: boolean;
}

/**
 * `idem release <key> --yes`: deletes one pending row nobody is working on (a lapsed lease, a key
 * marked unrecorded, a key without a lease), through {@link releaseStuckKey}. A key whose owner
 * holds a live lease is refused with the lease left and the owner's token (exit 1) unless
 * `--force` is given: its request may still be running, and its retry would run the work twice.
 * Without `--yes` it changes nothing and says so (exit 2). A done row, a missing key or another
 * fingerprint changes nothing (exit 1). With `--json`, one line `{"key":…,"result":…}` on stdout
 * whatever the outcome (`result` is `released`, `missing`, `done`, `mismatch`, `live` (with
 * `leaseUntil` and `attempt`) or `unconfirmed`).
 *
 * @returns the exit code: 0 released, 1 refused, 2 not confirmed
 */
export async function releaseCommand(io: CliIo, options: ReleaseOptions): Promise<number> {
  const key = printableKey(options.id);
  if (!options.yes) {
    if (options.json) writeJson(io.stdout, { key: options.id, result: 'unconfirmed' });
    io.stderr.write(
      `idem: release deletes the pending row of ${key}, and a retry then runs its work again; add --yes to confirm\n`,
    );
    return 2;
  }
  const outcome = await withStore(options.location, 'write', async (store) =>
    releaseStuckKey(store, options.id, {
      now: options.now,
      fingerprint: options.fingerprint,
      force: options.force === true,
    }),
  );
  if (options.json) writeJson(io.stdout, { key: options.id, ...outcome });
  if (outcome.result === 'live') {
    io.stderr.write(
      `idem: ${key} is held by a live lease (token ${outcome.fencingToken}, ends ${fromNow(outcome.leaseUntil, options.now)}): its request may still be running, and releasing it would let a retry run the work a second time; wait for the lease to lapse and run this again, or add --force if you know the owner is gone; nothing changed\n`,
    );
    return 1;
  }
  const { result } = outcome;
  const messages = {
    released: undefined,
    missing: `no row with the key ${key}: list the keys in flight with "idem pending"`,
    done: `${key} is done: its answer is kept until it expires, and "idem sweep" deletes it then`,
    mismatch:
      options.fingerprint === undefined
        ? `${key} is not pending: look at it with "idem show ${key}"`
        : `${key} is pending with another fingerprint than ${printableWord(options.fingerprint)}: see its fingerprint with "idem show ${key}"`,
  } as const;
  const message = messages[result];
  if (message === undefined) {
    if (!options.json) io.stdout.write(`released ${key}\n`);
    return 0;
  }
  io.stderr.write(`idem: ${message}; nothing changed\n`);
  return 1;
}

/** The arguments and flags of `idem resolve`. */
export interface ResolveOptions extends LocatedOptions {
  /** The stored id, scope included. */
  readonly id: string;
  /** The answer to store, as read from `--answer FILE` (JSON text). */
  readonly answerText: string;
  /** Where the answer was read from, for messages. */
  readonly answerFile: string;
  readonly json?: boolean;
}

/**
 * `idem resolve <key> --answer FILE`: settles a key held as unrecorded (its work threw
 * `OutcomeUnknownError`, or its answer could not be recorded) with the answer in FILE, a JSON
 * document in the form the key's entry point stores (an HTTP answer as `idem show --json` prints
 * its `response`), through {@link resolveUnknownOutcome}: fenced like the owner's own finish, so
 * a row released and claimed again meanwhile is never overwritten. Retries then replay it. With
 * `--json`, one line `{"key":…,"result":…}`.
 *
 * @returns the exit code: 0 resolved, 1 refused (nothing changed)
 */
export async function resolveCommand(io: CliIo, options: ResolveOptions): Promise<number> {
  const key = printableKey(options.id);
  let answer: unknown;
  try {
    answer = JSON.parse(options.answerText);
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    io.stderr.write(
      `idem: ${terminalSafe(options.answerFile)} is not JSON (${terminalSafe(reason)}); nothing changed\n`,
    );
    return 1;
  }
  const result = await withStore(options.location, 'write', async (store) =>
    resolveUnknownOutcome(store, options.id, answer),
  );
  if (options.json) writeJson(io.stdout, { key: options.id, result });
  const messages = {
    resolved: undefined,
    missing: `no row with the key ${key}`,
    done: `${key} is done already: its answer is kept until it expires`,
    notUnrecorded: `${key} is pending but not held for an operator: its request may still be running`,
    changed: `${key} changed hands while it was being resolved`,
  } as const;
  const message = messages[result];
  if (message === undefined) {
    if (!options.json) io.stdout.write(`resolved ${key}\n`);
    return 0;
  }
  io.stderr.write(`idem: ${message}; nothing changed\n`);
  return 1;
}

/** The flags of `idem erase`. */
export interface EraseCommandOptions extends LocatedOptions {
  /** The scope whose answers are erased. */
  readonly scope: string;
  readonly batch?: number;
  readonly yes?: boolean;
  readonly json?: boolean;
}

// The erasure and re-sealing operations of the stores this CLI opens (every dialect's KeyStore).
function keyStore(store: object): KeyStore<unknown, Mode> {
  if (!(store instanceof KeyStore)) {
    throw new InvalidOptionError('this store cannot erase or re-seal answers');
  }
  return store as KeyStore<unknown, Mode>;
}

/**
 * `idem erase --scope S --yes`: deletes every done answer of scope `S` in batches (the GDPR
 * erasure path) and prints the erased keys, one a line; pending keys of the scope are listed on
 * stderr and left (exit 1), so the command is run again once they are done. Without `--yes`
 * nothing changes (exit 2). `--json`: one line `{"scope","erased":[…],"pending":[…]}`.
 *
 * @returns the exit code: 0 all erased, 1 pending keys left, 2 not confirmed
 */
export async function eraseCommand(io: CliIo, options: EraseCommandOptions): Promise<number> {
  const scope = printableWord(options.scope);
  if (!options.yes) {
    io.stderr.write(
      `idem: erase deletes every stored answer of the scope ${scope}, and their retries then run again; add --yes to confirm\n`,
    );
    return 2;
  }
  const result = await withStore(options.location, 'write', async (store) =>
    keyStore(store).erase({
      scope: options.scope,
      ...(options.batch === undefined ? {} : { batchSize: options.batch }),
    }),
  );
  if (options.json) writeJson(io.stdout, { scope: options.scope, ...result });
  else for (const key of result.erased) io.stdout.write(`${printableKey(key)}\n`);
  io.stderr.write(`idem: erased ${result.erased.length} answer(s) of the scope ${scope}\n`);
  if (result.pending.length === 0) return 0;
  io.stderr.write(
    `idem: ${result.pending.length} key(s) of the scope ${scope} are still pending and were left: ${result.pending.map(printableKey).join(', ')}; run erase again once they are done\n`,
  );
  return 1;
}

/** The flags of `idem rekey`. */
export interface RekeyCommandOptions extends LocatedOptions {
  readonly batch?: number;
  readonly json?: boolean;
}

/**
 * `idem rekey`: re-seals every answer not under the current key of `IDEM_ENCRYPTION_KEYS` (a
 * retired key's, or plain JSON), in batches, and prints the counts. Answers that do not open are
 * listed on stderr and left (exit 1).
 *
 * @returns the exit code: 0 every answer under the current key, 1 some did not open
 */
export async function rekeyCommand(io: CliIo, options: RekeyCommandOptions): Promise<number> {
  const result = await withStore(options.location, 'write', async (store) =>
    keyStore(store).rekey(options.batch === undefined ? {} : { batchSize: options.batch }),
  );
  if (options.json) writeJson(io.stdout, result);
  else {
    io.stdout.write(
      `resealed ${result.resealed}, already current ${result.current}, unreadable ${result.unreadable.length}\n`,
    );
  }
  if (result.unreadable.length === 0) return 0;
  io.stderr.write(
    `idem: ${result.unreadable.length} answer(s) did not open with the keyring and were left: ${result.unreadable.map(printableKey).join(', ')}\n`,
  );
  return 1;
}
