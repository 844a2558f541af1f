import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { readKeptFingerprint } from '../../src/core/member-digests.js';
import {
  AnswerNotRecordedError,
  type IdempotentRequest,
  idempotent,
  RequestInProgressError,
  requestFingerprint,
} from '../../src/http/index.js';
import { SchemaMismatchError } from '../../src/index.js';
import { openSqliteStore, type SqliteIdempotencyStore } from '../../src/sqlite/index.js';
import { countedStore } from '../support/counted-store.js';
import { freshDbPath, tempDir } from '../support/temp.js';
import { until, watched } from '../support/waiting.js';

const dir = tempDir('idem-core-');
const request: IdempotentRequest = {
  method: 'POST',
  path: '/pay',
  headers: { 'idempotency-key': 'k1' },
  body: { amount: 1 },
};

describe('idempotent core', () => {
  let path: string;
  let store: SqliteIdempotencyStore<unknown>;
  beforeEach(() => {
    path = freshDbPath(dir);
    store = openSqliteStore(path);
  });
  afterEach(() => store.close());

  it('rethrows the handler error itself after releasing the key', async () => {
    const layer = idempotent(store, { now: () => 0 });
    const boom = new Error('boom');
    await expect(
      layer.handle(request, () => {
        throw boom;
      }),
    ).rejects.toBe(boom);
    expect(store.get('k1')).toBeNull();
  });

  it('reports a failed release together with the handler error', async () => {
    const layer = idempotent(store, { now: () => 0 });
    const decision = await layer.begin(request);
    if (decision.action !== 'run') throw new Error(`expected to run, got ${decision.action}`);
    store.close();
    const boom = new Error('boom');
    const failure = await decision.execution.fail(boom).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(AggregateError);
    expect((failure as AggregateError).errors[0]).toBe(boom);
  });

  it('keeps the key pending when the connection closed before finish, so a retry never runs', async () => {
    let runs = 0;
    const result = await idempotent(store, { now: () => 0 }).handle(request, () => {
      runs += 1;
      // The effect happens, then the database goes away before its answer is recorded.
      store.close();
      return { status: 201, body: { id: 1 } };
    });
    expect(result.outcome).toBe('problem');
    if (result.outcome !== 'problem') return;
    expect(result.problem).toBeInstanceOf(AnswerNotRecordedError);
    expect((result.problem as AnswerNotRecordedError).response.body).toEqual(
      Buffer.from('{"id":1}'),
    );
    expect(result.response.status).toBe(500);

    store = openSqliteStore(path);
    const record = store.get('k1');
    expect(record?.status).toBe('pending');
    // The fingerprint, then the digests of the body's members.
    expect(readKeptFingerprint(record?.fingerprint ?? '').head).toBe(requestFingerprint(request));
    const retry = await idempotent(store, { now: () => 0 }).handle(request, () => {
      runs += 1;
      return { status: 201, body: { id: 2 } };
    });
    expect(retry.outcome).toBe('problem');
    if (retry.outcome !== 'problem') return;
    expect(retry.problem).toBeInstanceOf(RequestInProgressError);
    expect(runs).toBe(1);
  });

  it('stores a text body as its text and replays those bytes', async () => {
    const layer = idempotent(store, { now: () => 0 });
    const xml = '<receipt id="1">caf\u00e9</receipt>';
    await layer.handle(request, () => ({
      status: 200,
      headers: { 'content-type': 'application/xml' },
      body: xml,
    }));
    expect(store.get('k1')?.response).toEqual({
      wire: 1,
      status: 200,
      headers: { 'content-type': 'application/xml' },
      body: xml,
    });
    const replay = await layer.handle(request, () => ({ status: 500 }));
    expect(replay.outcome).toBe('replayed');
    expect(replay.response.body).toEqual(Buffer.from(xml));
    expect(replay.response.headers?.['content-type']).toBe('application/xml');
  });

  it('refuses to replay a stored body marked base64 that is not base64', async () => {
    const layer = idempotent(store, { now: () => 0 });
    await layer.handle(request, () => ({ status: 200, body: new Uint8Array([0xff, 2, 3]) }));
    store.db.$client
      .prepare(
        "UPDATE keys SET response = json_set(response, '$.body', 'not base64!') WHERE id = 'k1'",
      )
      .run();
    await expect(layer.handle(request, () => ({ status: 201 }))).rejects.toThrow(
      SchemaMismatchError,
    );
  });

  it('refuses to replay a stored value that is not an HTTP response', async () => {
    const layer = idempotent(store, { now: () => 0 });
    const first = await layer.handle(request, () => ({ status: 201, body: {} }));
    expect(first.outcome).toBe('executed');
    const fingerprint = store.get('k1')?.fingerprint ?? '';
    store.db.$client.prepare("UPDATE keys SET response = '[1]' WHERE id = 'k1'").run();
    expect(store.get('k1')?.fingerprint).toBe(fingerprint);
    await expect(layer.handle(request, () => ({ status: 201 }))).rejects.toThrow(
      SchemaMismatchError,
    );
  });

  it('stores a bodiless answer and replays it without a body', async () => {
    const layer = idempotent(store, { now: () => 0 });
    await layer.handle(request, () => ({ status: 204, headers: { ETag: '"v1"' } }));
    const replay = await layer.handle(request, () => ({ status: 500 }));
    expect(replay).toEqual({
      outcome: 'replayed',
      response: { status: 204, headers: { etag: '"v1"', 'idempotent-replayed': 'true' } },
    });
  });

  it('keeps the content type of a text answer even when no header is listed as stored', async () => {
    const layer = idempotent(store, { now: () => 0, storedHeaders: [] });
    await layer.handle(request, () => ({
      status: 200,
      headers: { 'Content-Type': 'text/plain', 'X-Trace': 't1' },
      body: 'ok',
    }));
    const replay = await layer.handle(request, () => ({ status: 500 }));
    expect(replay.response).toEqual({
      status: 200,
      headers: { 'content-type': 'text/plain', 'idempotent-replayed': 'true' },
      body: Buffer.from('ok'),
    });
  });

  it('lets a waiting duplicate run once the owner released the key after a failure', async () => {
    const counted = countedStore(store);
    const layer = idempotent(counted.store, {
      now: () => 0,
      wait: { timeoutMs: 10_000, intervalMs: 10 },
    });
    const owner = await layer.begin(request);
    if (owner.action !== 'run') throw new Error(`expected to run, got ${owner.action}`);
    const waiter = watched(layer.begin(request));
    // The duplicate reads the row again and again without answering: it is in the wait when the
    // owner fails, so the claim it then makes is the wait's, not a first look at a free key.
    await until(() => counted.calls('get') >= 2 || waiter.settled());
    expect(waiter.settled()).toBe(false);
    await owner.execution.fail(new Error('boom'));
    const next = await waiter.promise;
    expect(next.action).toBe('run');
    expect(store.get('k1')?.status).toBe('pending');
  });
});

describe('idempotent core, answers given as values', () => {
  it('stores what JSON.stringify sent for a value with an undefined field, and replays it', async () => {
    const store = openSqliteStore(freshDbPath(dir));
    try {
      const layer = idempotent(store, { now: () => 0 });
      const first = await layer.handle(request, () => ({
        status: 201,
        body: { x: undefined, y: 1 } as never,
      }));
      expect(first.outcome).toBe('executed');
      expect(first.response.body).toEqual(Buffer.from('{"y":1}'));
      const replay = await layer.handle(request, () => ({ status: 500 }));
      expect(replay.outcome).toBe('replayed');
      expect(replay.response.body).toEqual(Buffer.from('{"y":1}'));
    } finally {
      store.close();
    }
  });

  it('answers a body it cannot fingerprint with a 400 problem, before the handler and the store', async () => {
    const store = openSqliteStore(freshDbPath(dir));
    try {
      let runs = 0;
      const result = await idempotent(store, { now: () => 0 }).handle(
        { ...request, body: { amount: Number.NaN } },
        () => {
          runs += 1;
          return { status: 201 };
        },
      );
      expect(result.outcome).toBe('problem');
      expect(result.response.status).toBe(400);
      expect(result.response.headers?.['content-type']).toBe('application/problem+json');
      expect(runs).toBe(0);
      expect(store.get('k1')).toBeNull();
    } finally {
      store.close();
    }
  });

  it('replays an answer stored by 0.1.0 (a JSON value) as 0.1.0 sent it', async () => {
    const store = openSqliteStore(freshDbPath(dir));
    try {
      const fingerprint = requestFingerprint(request);
      store.reserve('k1', fingerprint, 100);
      store.finish('k1', fingerprint, {
        status: 201,
        headers: { 'content-type': 'application/json; charset=utf-8', location: '/p/1' },
        body: { id: 'p_1', amount: 10 },
      });
      store.reserve('k2', fingerprint, 100);
      store.finish('k2', fingerprint, {
        status: 200,
        headers: { 'content-type': 'image/png' },
        body: Buffer.from([0x89, 0x50]).toString('base64'),
        encoding: 'base64',
      });
      const layer = idempotent(store, { now: () => 0 });
      const json = await layer.handle(request, () => ({ status: 500 }));
      expect(json.outcome).toBe('replayed');
      expect(json.response.status).toBe(201);
      expect(json.response.headers?.location).toBe('/p/1');
      expect(json.response.body).toEqual(Buffer.from('{"id":"p_1","amount":10}'));
      const png = await layer.handle({ ...request, headers: { 'idempotency-key': 'k2' } }, () => ({
        status: 500,
      }));
      expect(png.outcome).toBe('replayed');
      expect(png.response.body).toEqual(new Uint8Array([0x89, 0x50]));
    } finally {
      store.close();
    }
  });
});
