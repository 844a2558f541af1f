import { describe, expect, it } from 'vitest';
import { openSqliteStore } from '../../src/sqlite/index.js';
import { serverKinds } from '../support/http-servers.js';
import { freshDbPath, tempDir } from '../support/temp.js';

const dir = tempDir('idem-http-after-expiry-');

describe.each(serverKinds)('afterExpiry on the $name', (kind) => {
  async function serve(afterExpiry?: 'new-request') {
    const store = openSqliteStore(freshDbPath(dir));
    const clock = { now: 1_000 };
    let runs = 0;
    const server = await kind.start(
      store,
      { ttlSeconds: 10, now: () => clock.now, afterExpiry },
      async () => {
        runs++;
        return { status: 201, headers: {}, kind: 'json', body: { payment: runs } };
      },
    );
    const pay = () =>
      fetch(`${server.url}/run`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': 'pay-1' },
        body: JSON.stringify({ amount: 10 }),
      });
    return {
      clock,
      pay,
      runs: () => runs,
      close: async () => {
        await server.close();
        store.close();
      },
    };
  }

  it('answers 409 answer-expired by default, saying when the key becomes new', async () => {
    const app = await serve();
    try {
      expect((await app.pay()).status).toBe(201);
      app.clock.now += 10;
      const expired = await app.pay();
      expect(expired.status).toBe(409);
      const problem = (await expired.json()) as { type: string; detail: string };
      expect(problem.type).toBe('urn:drizzle-idempotency:problem:answer-expired');
      expect(problem.detail).toContain('next retention sweep deletes it');
      expect(problem.detail).toContain("afterExpiry: 'new-request'");
      expect(app.runs()).toBe(1);
    } finally {
      await app.close();
    }
  });

  it("'new-request' runs the expired key as a new request at once", async () => {
    const app = await serve('new-request');
    try {
      expect((await app.pay()).status).toBe(201);
      app.clock.now += 10;
      const again = await app.pay();
      expect(again.status).toBe(201);
      expect(again.headers.get('idempotent-replayed')).toBeNull();
      expect(await again.json()).toEqual({ payment: 2 });
      const replay = await app.pay();
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(app.runs()).toBe(2);
    } finally {
      await app.close();
    }
  });
});
