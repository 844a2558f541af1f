import { once } from 'node:events';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import pg from 'pg';

/**
 * A local stand-in for Neon's SQL-over-HTTP endpoint, so that `@neondatabase/serverless`'s
 * `neon()` (and drizzle's `neon-http` over it) runs unchanged against the real PostgreSQL server.
 * It speaks what the driver sends and reads: a POST of `{ query, params }`, or of
 * `{ queries: [...] }` for a batch, which runs in one transaction at the isolation level the
 * `Neon-Batch-Isolation-Level` header names; rows come back as arrays of the server's text values
 * with each field's type OID, which the driver then parses; a refused statement comes back as
 * HTTP 400 with the server's error fields. What it does not reproduce: Neon's proxy, its
 * connection pooling, authentication and its limits.
 */
export interface NeonEndpoint {
  /** The URL to give `neonConfig.fetchEndpoint`. */
  readonly url: string;
  /** How many requests it answered, and how many of them were batches. */
  readonly served: { requests: number; batches: number };
  /**
   * Makes the next batch commit and then lose its answer: the connection is destroyed instead of
   * the 200 being sent, as when the network fails after the database committed.
   */
  dropNextBatchAnswer(): void;
  close(): Promise<void>;
}

interface NeonQuery {
  readonly query: string;
  readonly params?: unknown[];
}

// The driver asks for raw text values (Neon-Raw-Text-Output) and parses them itself.
const RAW_TEXT = { getTypeParser: () => (value: string) => value };

const ERROR_FIELDS = [
  'severity',
  'code',
  'detail',
  'hint',
  'position',
  'internalPosition',
  'internalQuery',
  'where',
  'schema',
  'table',
  'column',
  'dataType',
  'constraint',
  'file',
  'line',
  'routine',
] as const;

const ISOLATION: Record<string, string> = {
  ReadUncommitted: 'READ UNCOMMITTED',
  ReadCommitted: 'READ COMMITTED',
  RepeatableRead: 'REPEATABLE READ',
  Serializable: 'SERIALIZABLE',
};

async function body(request: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return JSON.parse(Buffer.concat(chunks).toString('utf8'));
}

async function run(client: pg.PoolClient, { query, params = [] }: NeonQuery) {
  const result = await client.query({
    text: query,
    values: params,
    rowMode: 'array',
    types: RAW_TEXT,
  });
  return {
    fields: result.fields,
    rows: result.rows,
    command: result.command,
    rowCount: result.rowCount,
    rowAsArray: true,
  };
}

function refusal(response: ServerResponse, error: unknown) {
  const source = error as Record<string, unknown>;
  const answer: Record<string, unknown> = { message: String(source.message ?? error) };
  for (const field of ERROR_FIELDS) if (source[field] !== undefined) answer[field] = source[field];
  response.writeHead(400, { 'content-type': 'application/json' });
  response.end(JSON.stringify(answer));
}

/**
 * Starts the endpoint on 127.0.0.1, running every statement on the PostgreSQL server at `url`.
 *
 * @param url - the real server's connection string
 */
export async function startNeonEndpoint(url: string): Promise<NeonEndpoint> {
  const pool = new pg.Pool({ connectionString: url, max: 8 });
  const served = { requests: 0, batches: 0 };
  let dropNext = false;
  const server = createServer(async (request, response) => {
    served.requests += 1;
    const client = await pool.connect();
    try {
      const payload = (await body(request)) as NeonQuery | { queries: NeonQuery[] };
      if ('queries' in payload) {
        served.batches += 1;
        const level = ISOLATION[String(request.headers['neon-batch-isolation-level'])];
        await client.query(level === undefined ? 'BEGIN' : `BEGIN ISOLATION LEVEL ${level}`);
        try {
          const results = [];
          for (const query of payload.queries) results.push(await run(client, query));
          await client.query('COMMIT');
          if (dropNext) {
            dropNext = false;
            request.socket.destroy();
            return;
          }
          response.writeHead(200, { 'content-type': 'application/json' });
          response.end(JSON.stringify({ results }));
        } catch (error) {
          await client.query('ROLLBACK');
          throw error;
        }
      } else {
        const result = await run(client, payload);
        response.writeHead(200, { 'content-type': 'application/json' });
        response.end(JSON.stringify(result));
      }
    } catch (error) {
      refusal(response, error);
    } finally {
      client.release();
    }
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/sql`,
    served,
    dropNextBatchAnswer: () => {
      dropNext = true;
    },
    close: async () => {
      server.close();
      await once(server, 'close');
      await pool.end();
    },
  };
}
