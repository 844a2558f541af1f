import { type MessagePort, parentPort, workerData } from 'node:worker_threads';
import { AnswerCache } from '../core/answer-cache.js';
import type { DeploymentFinding } from '../core/deployment.js';
import { GroupCommit, type Transact } from '../core/group-commit.js';
import { sqliteQueries } from '../sqlite-dialect/queries.js';
import { keys, sqliteKeysTable } from '../sqlite-dialect/schema.js';
import { applySqliteMigrations } from './migrate.js';
import { openSqliteDatabase, type SqliteSynchronous } from './open.js';
import { betterSqliteStatements } from './store.js';
import {
  type FromWorker,
  READS,
  type StatementName,
  type ToWorker,
  toWire,
  type WorkerOpenData,
  type WorkerResult,
} from './worker-protocol.js';

// The entry of the worker thread of `SqliteWorkerStore`: it opens the file as `openSqliteStore`
// does, then runs the statements each message carries. The calls of one message (one turn of the
// store's thread), and of every message read in the same turn here, commit in one transaction.

function post(port: MessagePort, message: FromWorker): void {
  port.postMessage(message);
}

function serve(port: MessagePort, data: WorkerOpenData): void {
  const table = data.table === undefined ? undefined : sqliteKeysTable(data.table);
  const tableOption = table === undefined ? {} : { table };
  const findings: DeploymentFinding[] = [];
  const db = openSqliteDatabase(
    data.path,
    {
      ...tableOption,
      ...(data.busyTimeoutMs === undefined ? {} : { busyTimeoutMs: data.busyTimeoutMs }),
      ...(data.synchronous === undefined
        ? {}
        : { synchronous: data.synchronous as SqliteSynchronous }),
      onDeploymentWarning: (finding) => findings.push(finding),
    },
    (opened) => applySqliteMigrations(opened, tableOption),
  );
  const keysTable = table ?? keys;
  const cache = data.answerCacheSize > 0 ? new AnswerCache(data.answerCacheSize) : undefined;
  const statements = betterSqliteStatements(
    db,
    sqliteQueries(db, keysTable),
    keysTable,
    cache,
    () => db.$client.close(),
  );
  const transaction = db.$client.transaction((body: () => unknown) => body());
  const group = new GroupCommit(((body) => transaction.immediate(body)) as Transact);
  // A close goes after every call sent before it, and outside their transaction: inside it, it
  // would end the connection before the batch commits.
  const order = (name: StatementName, run: () => unknown): Promise<unknown> => {
    if (name === 'close') return group.close(run);
    return READS.has(name) ? group.read(run) : group.run(run);
  };
  port.on('message', (message: ToWorker) => {
    const answers = message.calls.map((call): Promise<WorkerResult> => {
      const statement = statements[call.name] as (...args: readonly unknown[]) => unknown;
      const run = () => statement(...call.args);
      return order(call.name, run).then(
        (value) => ({ id: call.id, ok: true, value }),
        (error: unknown) => ({ id: call.id, ok: false, error: toWire(error) }),
      );
    });
    void Promise.all(answers).then((results) =>
      post(port, { kind: 'results', results, batches: group.batches }),
    );
  });
  post(port, { kind: 'ready', findings });
}

if (parentPort === null) {
  throw new Error('worker-thread is the entry of a worker thread, not a module to import');
}
try {
  serve(parentPort, workerData as WorkerOpenData);
} catch (error) {
  post(parentPort, { kind: 'failed', error: toWire(error) });
  // Nothing else holds the thread open: it ends once the message is sent.
  parentPort.close();
}
