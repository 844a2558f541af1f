import { createClient } from '@libsql/client';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DatabaseOpenError } from '../../src/index.js';
import { openLibsqlStore } from '../../src/libsql/index.js';
import { type HranaEndpoint, startHranaEndpoint } from '../support/hrana-endpoint.js';
import { REMOTE_TOKEN } from '../support/libsql-harness.js';
import { freshDbPath, tempDir } from '../support/temp.js';

const TOKEN = REMOTE_TOKEN;

describe('openLibsqlStore on a remote URL', () => {
  const dir = tempDir();
  let path: string;
  let endpoint: HranaEndpoint;
  beforeAll(async () => {
    path = freshDbPath(dir);
    endpoint = await startHranaEndpoint(path, TOKEN);
  });
  afterAll(async () => endpoint?.close());
  const port = () => new URL(endpoint.url).port;

  it('migrates over http:// and then over libsql:// only reads: each migration recorded once', async () => {
    const first = await openLibsqlStore(endpoint.url, { authToken: TOKEN });
    await first.close();
    const sent = endpoint.statements.length;
    const again = await openLibsqlStore(`libsql://127.0.0.1:${port()}?tls=0`, {
      authToken: TOKEN,
    });
    expect(endpoint.statements.slice(sent).join('\n')).not.toMatch(/\b(CREATE|INSERT|ALTER)\b/);
    expect(await again.reserve('k', 'd', Date.now() / 1000 + 60)).toBe(true);
    await again.close();
    const file = new Database(path, { readonly: true });
    try {
      const rows = file.prepare('SELECT created_at FROM __idempotency_migrations').all() as {
        created_at: number;
      }[];
      expect(rows.length).toBeGreaterThan(0);
      expect(new Set(rows.map((row) => row.created_at)).size).toBe(rows.length);
    } finally {
      file.close();
    }
    expect(endpoint.statements.some((text) => /journal_mode/i.test(text))).toBe(false);
  });

  it('sweeps without the checkpoint the server refuses', async () => {
    const client = createClient({ url: endpoint.url, authToken: TOKEN });
    await expect(client.execute('PRAGMA wal_checkpoint(PASSIVE)')).rejects.toThrow(
      /not authorized/,
    );
    client.close();
    const store = await openLibsqlStore(endpoint.url, { authToken: TOKEN });
    try {
      const now = Date.now() / 1000;
      for (const key of ['s1', 's2', 's3']) {
        await store.reserve(key, 'd', now - 1);
        await store.finish(key, 'd', { ok: key });
      }
      expect(await store.sweepBatch(now, 10)).toBe(3);
      expect(await store.get('s1')).toBeNull();
    } finally {
      await store.close();
    }
  });

  it('refuses a wrong token with a DatabaseOpenError that shows neither token', async () => {
    const failure = openLibsqlStore(`${endpoint.url}/?authToken=secret-in-url`, {
      authToken: 'wrong-token',
    });
    await expect(failure).rejects.toBeInstanceOf(DatabaseOpenError);
    const message = await failure.catch((error: Error) => error.message);
    expect(message).not.toMatch(/wrong-token|secret-in-url/);
  });

  it('refuses an authToken that is not a string', async () => {
    await expect(
      openLibsqlStore(endpoint.url, { authToken: 42 as unknown as string }),
    ).rejects.toBeInstanceOf(DatabaseOpenError);
  });
});
