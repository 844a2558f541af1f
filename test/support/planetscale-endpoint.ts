import { once } from 'node:events';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import mysql from 'mysql2/promise';

/**
 * A local stand-in for PlanetScale's HTTP API, so that `@planetscale/database` (and drizzle's
 * `planetscale-serverless` over it) runs unchanged against the real MariaDB server. It speaks what
 * the driver sends and reads: `POST /psdb.v1alpha1.Database/Execute` with `{ query, session }`
 * (the driver has already put the values into the SQL text); the answer carries `session` back,
 * and `result` with `fields` named by Vitess's types (`VARBINARY`, `INT64`, `FLOAT64`, …, the
 * charset 63 marking binary ones), `rows` as base64-encoded raw values with their lengths (-1 for
 * NULL), `rowsAffected` and `insertId` as strings. A session holds one server connection while a
 * transaction is open in it, as the service's does. A refused statement answers
 * `{ error: { code, message } }` with the message in Vitess's words, the MySQL error number
 * written into it as `(errno N)`. What it does not reproduce: vtgate's query planning and its
 * refusals, authentication, PlanetScale's limits.
 */
export interface PlanetscaleEndpoint {
  /** The URL to give the driver (`url`, with any user and password). */
  readonly url: string;
  /** The statements it ran, in order. */
  readonly statements: string[];
  close(): Promise<void>;
}

// mysql2's column types, by number, under Vitess's names.
const TYPES: Record<number, [signed: string, unsigned?: string]> = {
  1: ['INT8', 'UINT8'],
  2: ['INT16', 'UINT16'],
  3: ['INT32', 'UINT32'],
  4: ['FLOAT32'],
  5: ['FLOAT64'],
  6: ['NULL_TYPE'],
  7: ['TIMESTAMP'],
  8: ['INT64', 'UINT64'],
  9: ['INT24', 'UINT24'],
  10: ['DATE'],
  11: ['TIME'],
  12: ['DATETIME'],
  13: ['YEAR'],
  16: ['BIT'],
  245: ['JSON'],
  246: ['DECIMAL'],
};
const BINARY_CHARSET = 63;
const UNSIGNED_FLAG = 32;

function vitessType(field: mysql.FieldPacket): string {
  const code = field.columnType ?? 0;
  const binary = field.characterSet === BINARY_CHARSET;
  if (code === 252) return binary ? 'BLOB' : 'TEXT';
  if (code === 253 || code === 15) return binary ? 'VARBINARY' : 'VARCHAR';
  if (code === 254) return binary ? 'BINARY' : 'CHAR';
  const [signed, unsigned] = TYPES[code] ?? ['VARCHAR'];
  return (field.flags as number) & UNSIGNED_FLAG && unsigned ? unsigned : signed;
}

// The gRPC code Vitess reports an error under.
function vitessCode(errno: number): string {
  if (errno === 1062) return 'ALREADY_EXISTS';
  if (errno === 1213) return 'ABORTED';
  return 'UNKNOWN';
}

interface Session {
  connection?: mysql.PoolConnection;
}

async function body(request: IncomingMessage): Promise<{ query: string; session?: unknown }> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return JSON.parse(Buffer.concat(chunks).toString('utf8'));
}

/**
 * Starts the endpoint on 127.0.0.1, running every statement on the server at `url`.
 *
 * @param url - the real server's connection string
 */
export async function startPlanetscaleEndpoint(url: string): Promise<PlanetscaleEndpoint> {
  const pool = mysql.createPool({ uri: url, connectionLimit: 16 });
  const sessions = new Map<string, Session>();
  const statements: string[] = [];
  let counter = 0;
  const server = createServer(async (request, response) => {
    // Sent only once the session knows whether it keeps its connection: the driver's next
    // statement of a transaction may arrive the moment it reads this one's answer.
    let reply: unknown;
    const answer = (value: unknown) => {
      reply = value;
    };
    if (!request.url?.endsWith('/psdb.v1alpha1.Database/Execute')) {
      response.writeHead(404).end();
      return;
    }
    const { query, session: sent } = await body(request);
    statements.push(query);
    const id = (sent as { id?: string } | null)?.id ?? `s${++counter}`;
    const session = sessions.get(id) ?? {};
    sessions.set(id, session);
    const connection = session.connection ?? (await pool.getConnection());
    const own = { id };
    try {
      const [result, fields] = await connection.query({
        sql: query,
        // The raw text-protocol bytes of every value, as the service sends them.
        typeCast: (field: { buffer(): Buffer | null }) => field.buffer(),
        rowsAsArray: true,
      });
      if (Array.isArray(result)) {
        const rows = (result as (Buffer | null)[][]).map((row) => ({
          lengths: row.map((value) => String(value === null ? -1 : value.length)),
          values: Buffer.concat(row.filter((value): value is Buffer => value !== null)).toString(
            'base64',
          ),
        }));
        answer({
          session: own,
          result: {
            fields: (fields ?? []).map((field) => ({
              name: field.name,
              type: vitessType(field),
              charset: field.characterSet,
              flags: field.flags,
            })),
            rows,
          },
          timing: 0,
        });
      } else {
        const header = result as mysql.ResultSetHeader;
        answer({
          session: own,
          result: {
            rowsAffected: String(header.affectedRows),
            insertId: String(header.insertId),
          },
          timing: 0,
        });
      }
    } catch (error) {
      const {
        errno = 0,
        sqlState = 'HY000',
        message,
      } = error as mysql.QueryError & {
        errno?: number;
        sqlState?: string;
      };
      answer({
        session: own,
        error: {
          code: vitessCode(errno),
          message: `target: test.0.primary: vttablet: rpc error: code = ${vitessCode(errno)} desc = ${message} (errno ${errno}) (sqlstate ${sqlState}) (CallerID: planetscale-admin): Sql: "${query}", BindVars: {REDACTED}`,
        },
      });
    } finally {
      const [[open]] = (await connection.query('SELECT @@in_transaction AS open')) as unknown as [
        [{ open: number }],
      ];
      if (Number(open?.open) === 1) {
        session.connection = connection;
      } else {
        session.connection = undefined;
        sessions.delete(id);
        connection.release();
      }
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(JSON.stringify(reply));
    }
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://app:secret@127.0.0.1:${port}`,
    statements,
    close: async () => {
      server.close();
      await once(server, 'close');
      for (const session of sessions.values()) session.connection?.release();
      await pool.end();
    },
  };
}
