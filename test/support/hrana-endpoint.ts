import { once } from 'node:events';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import Database from 'better-sqlite3';

/**
 * A local stand-in for a remote libSQL server (Turso, sqld), speaking the Hrana-over-HTTP
 * protocol (version 2, JSON) that `@libsql/client` uses for `http://` and `libsql://` URLs:
 * `POST /v2/pipeline` with a baton and `execute`, `batch` (with step conditions), `sequence`,
 * `get_autocommit`, `store_sql`/`close_sql` and `close` requests. Each stream is one connection
 * to a real SQLite file (better-sqlite3, WAL), kept between requests by its baton, so interactive
 * transactions hold their connection as on the server. A write that finds the file locked is
 * tried again until the lock is free, as the server queues writers. It checks the bearer token
 * and, like the hosted service, refuses `PRAGMA wal_checkpoint`. What it does not reproduce:
 * sqld's own SQL engine (libSQL), replication, WebSockets, its limits.
 */
export interface HranaEndpoint {
  /** The `http://` URL to give `createClient`. */
  readonly url: string;
  /** The statements it ran, in order. */
  readonly statements: string[];
  close(): Promise<void>;
}

type Value =
  | { type: 'null' }
  | { type: 'integer'; value: string }
  | { type: 'float'; value: number }
  | { type: 'text'; value: string }
  | { type: 'blob'; base64: string };

interface Stmt {
  sql?: string;
  sql_id?: number;
  args?: Value[];
  named_args?: { name: string; value: Value }[];
  want_rows?: boolean;
}

type Condition =
  | { type: 'ok' | 'error'; step: number }
  | { type: 'not'; cond: Condition }
  | { type: 'and' | 'or'; conds: Condition[] }
  | { type: 'is_autocommit' };

type Request =
  | { type: 'execute'; stmt: Stmt }
  | { type: 'batch'; batch: { steps: { condition?: Condition | null; stmt: Stmt }[] } }
  | { type: 'sequence'; sql?: string; sql_id?: number }
  | { type: 'get_autocommit' }
  | { type: 'store_sql'; sql_id: number; sql: string }
  | { type: 'close_sql'; sql_id: number }
  | { type: 'close' };

interface Stream {
  readonly db: Database.Database;
  readonly sqls: Map<number, string>;
}

class Refused extends Error {
  constructor(
    message: string,
    readonly code: string,
  ) {
    super(message);
  }
}

function decode(value: Value): unknown {
  switch (value.type) {
    case 'null':
      return null;
    case 'integer':
      return BigInt(value.value);
    case 'float':
      return value.value;
    case 'text':
      return value.value;
    case 'blob':
      return Buffer.from(value.base64, 'base64');
  }
}

function encode(value: unknown): Value {
  if (value === null || value === undefined) return { type: 'null' };
  if (typeof value === 'bigint') return { type: 'integer', value: value.toString() };
  if (typeof value === 'number') return { type: 'float', value };
  if (typeof value === 'string') return { type: 'text', value };
  return { type: 'blob', base64: Buffer.from(value as Uint8Array).toString('base64') };
}

function execute(stream: Stream, stmt: Stmt, statements: string[]) {
  const text = stmt.sql ?? stream.sqls.get(stmt.sql_id ?? -1);
  if (text === undefined) throw new Refused('no SQL in the statement', 'SQL_NOT_FOUND');
  statements.push(text);
  if (/^\s*PRAGMA\s+(\w+\.)?wal_checkpoint/i.test(text)) {
    throw new Refused('SQLite error: not authorized', 'SQLITE_AUTH');
  }
  const prepared = stream.db.prepare(text);
  const named = Object.fromEntries(
    (stmt.named_args ?? []).map(({ name, value }) => [name.replace(/^[:@$]/, ''), decode(value)]),
  );
  const args = [...(stmt.args ?? []).map(decode), ...(stmt.named_args?.length ? [named] : [])];
  if (prepared.reader) {
    prepared.safeIntegers(true).raw(true);
    const rows = prepared.all(...args) as unknown[][];
    return {
      cols: prepared.columns().map((column) => ({ name: column.name, decltype: column.type })),
      rows: rows.map((row) => row.map(encode)),
      affected_row_count: 0,
      last_insert_rowid: null,
    };
  }
  const { changes, lastInsertRowid } = prepared.run(...args);
  return {
    cols: [],
    rows: [],
    affected_row_count: changes,
    last_insert_rowid: String(lastInsertRowid),
  };
}

function failure(error: unknown) {
  const { message, code } = error as { message?: string; code?: string };
  return { message: String(message ?? error), code: code ?? 'UNKNOWN' };
}

function holds(
  condition: Condition | null | undefined,
  outcomes: ('ok' | 'error' | undefined)[],
  db: Database.Database,
): boolean {
  if (condition === null || condition === undefined) return true;
  switch (condition.type) {
    case 'ok':
    case 'error':
      return outcomes[condition.step] === condition.type;
    case 'not':
      return !holds(condition.cond, outcomes, db);
    case 'and':
      return condition.conds.every((each) => holds(each, outcomes, db));
    case 'or':
      return condition.conds.some((each) => holds(each, outcomes, db));
    case 'is_autocommit':
      return !db.inTransaction;
  }
}

function run(stream: Stream, request: Request, statements: string[]) {
  switch (request.type) {
    case 'execute':
      return { type: 'execute', result: execute(stream, request.stmt, statements) };
    case 'batch': {
      const outcomes: ('ok' | 'error' | undefined)[] = [];
      const step_results: unknown[] = [];
      const step_errors: unknown[] = [];
      for (const step of request.batch.steps) {
        if (!holds(step.condition, outcomes, stream.db)) {
          outcomes.push(undefined);
          step_results.push(null);
          step_errors.push(null);
          continue;
        }
        try {
          step_results.push(execute(stream, step.stmt, statements));
          step_errors.push(null);
          outcomes.push('ok');
        } catch (error) {
          step_results.push(null);
          step_errors.push(failure(error));
          outcomes.push('error');
        }
      }
      return { type: 'batch', result: { step_results, step_errors } };
    }
    case 'sequence': {
      const text = request.sql ?? stream.sqls.get(request.sql_id ?? -1) ?? '';
      statements.push(text);
      stream.db.exec(text);
      return { type: 'sequence' };
    }
    case 'get_autocommit':
      return { type: 'get_autocommit', is_autocommit: !stream.db.inTransaction };
    case 'store_sql':
      stream.sqls.set(request.sql_id, request.sql);
      return { type: 'store_sql' };
    case 'close_sql':
      stream.sqls.delete(request.sql_id);
      return { type: 'close_sql' };
    case 'close':
      return { type: 'close' };
  }
}

const busy = (results: { type: string; error?: { code: string }; response?: unknown }[]) =>
  JSON.stringify(results).includes('"SQLITE_BUSY');

async function body(
  request: IncomingMessage,
): Promise<{ baton: string | null; requests: Request[] }> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return JSON.parse(Buffer.concat(chunks).toString('utf8'));
}

/**
 * Starts the endpoint on 127.0.0.1 over the SQLite file `path`, accepting the bearer `token`.
 *
 * @param path - the database file (created if missing)
 * @param token - the auth token the client must send
 */
export async function startHranaEndpoint(path: string, token: string): Promise<HranaEndpoint> {
  const streams = new Map<string, Stream>();
  const statements: string[] = [];
  let counter = 0;
  const open = (): Stream => {
    // timeout 0: a locked file answers SQLITE_BUSY at once, and the request is tried again
    // later, so one stream waiting never blocks the server (better-sqlite3 waits synchronously).
    const db = new Database(path, { timeout: 0 });
    db.pragma('journal_mode = WAL');
    return { db, sqls: new Map() };
  };
  const server = createServer(async (request, response) => {
    if (request.headers.authorization !== `Bearer ${token}`) {
      response.writeHead(401, { 'content-type': 'text/plain' }).end('Unauthorized');
      return;
    }
    if (request.method === 'GET' && request.url === '/v2') {
      response.writeHead(200).end();
      return;
    }
    if (request.url !== '/v2/pipeline') {
      response.writeHead(404).end();
      return;
    }
    const { baton, requests } = await body(request);
    const id = baton ?? `b${++counter}`;
    const stream = streams.get(id) ?? open();
    streams.set(id, stream);
    let closed = false;
    let results: { type: string; error?: { code: string; message: string }; response?: unknown }[];
    for (const deadline = Date.now() + 30_000; ; ) {
      results = [];
      for (const each of requests) {
        try {
          results.push({ type: 'ok', response: run(stream, each, statements) });
          if (each.type === 'close') closed = true;
        } catch (error) {
          results.push({ type: 'error', error: failure(error) });
        }
      }
      // A write that met the lock of another stream changed nothing: run it again once free.
      if (!busy(results) || stream.db.inTransaction || Date.now() > deadline) break;
      await new Promise((resolve) => setTimeout(resolve, 2 + Math.random() * 5));
    }
    if (closed) {
      if (stream.db.inTransaction) stream.db.exec('ROLLBACK');
      stream.db.close();
      streams.delete(id);
    }
    response.writeHead(200, { 'content-type': 'application/json' });
    response.end(JSON.stringify({ baton: closed ? null : id, base_url: null, results }));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    statements,
    close: async () => {
      server.close();
      await once(server, 'close');
      for (const stream of streams.values()) stream.db.close();
    },
  };
}
