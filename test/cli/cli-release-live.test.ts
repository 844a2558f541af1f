import { describe, expect, it } from 'vitest';
import { openSqliteStore } from '../../src/sqlite/index.js';
import { idem } from '../support/cli.js';
import { serverKinds } from '../support/http-servers.js';
import { freshDbPath, tempDir } from '../support/temp.js';
import { deferred, until } from '../support/waiting.js';

const dir = tempDir('idem-cli-release-live-');
const express = serverKinds.find((kind) => kind.name === 'Express adapter');

describe('idem release on a request still running', () => {
  it('refuses the live key without --force: the request records its answer, its retry replays it', async () => {
    if (express === undefined) throw new Error('no Express server kind');
    const path = freshDbPath(dir);
    const store = openSqliteStore(path);
    const gate = deferred();
    let payments = 0;
    const server = await express.start(store, { leaseSeconds: 60 }, async () => {
      payments++;
      await gate.promise;
      return { status: 201, headers: {}, kind: 'json', body: { payment: payments } };
    });
    try {
      const pay = () =>
        fetch(`${server.url}/run`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'idempotency-key': 'pay-1' },
          body: JSON.stringify({ amount: 10 }),
        });
      const first = pay();
      await until(() => store.get('pay-1')?.status === 'pending');
      const before = store.get('pay-1');

      const refused = await idem(['release', 'pay-1', '--yes', '--db', path]);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain('live lease');
      expect(refused.stderr).toContain(`token ${before?.fencingToken}`);
      expect(refused.stderr).toMatch(/ends in \d+(\.\d)?s/);
      expect(refused.stderr).toContain('--force');
      expect(store.get('pay-1')).toEqual(before);

      const json = await idem(['release', 'pay-1', '--yes', '--json', '--db', path]);
      expect(JSON.parse(json.stdout)).toEqual({
        key: 'pay-1',
        result: 'live',
        leaseUntil: before?.leaseUntil,
        fencingToken: before?.fencingToken,
      });

      gate.resolve();
      const answer = await first;
      expect(answer.status).toBe(201);
      const retry = await pay();
      expect(retry.status).toBe(201);
      expect(retry.headers.get('idempotent-replayed')).toBe('true');
      expect(payments).toBe(1);
    } finally {
      gate.resolve();
      await server.close();
      store.close();
    }
  }, 60_000);

  it('--force releases the live key', async () => {
    const path = freshDbPath(dir);
    const store = openSqliteStore(path);
    const now = Date.now() / 1000;
    store.acquire('k', 'fp', { now, expires: now + 3600, leaseSeconds: 600 });
    const forced = await idem(['release', 'k', '--yes', '--force', '--db', path]);
    expect(forced.code).toBe(0);
    expect(store.get('k')).toBeNull();
    store.close();
  }, 60_000);
});
