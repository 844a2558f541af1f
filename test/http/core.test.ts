import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  AnswerNotRecordedError,
  type IdempotentRequest,
  idempotent,
} from '../../src/http/index.js';
import { SchemaMismatchError } from '../../src/index.js';
import { openSqliteStore, type SqliteIdempotencyStore } from '../../src/sqlite/index.js';
import { freshDbPath, tempDir } from '../support/temp.js';

const dir = tempDir('idem-core-');
const request: IdempotentRequest = {
  method: 'POST',
  path: '/pay',
  headers: { 'idempotency-key': 'k1' },
  body: { amount: 1 },
};

describe('idempotent core', () => {
  let store: SqliteIdempotencyStore<unknown>;
  beforeEach(() => {
    store = openSqliteStore(freshDbPath(dir));
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

  it('turns a store failure at finish into an answer-not-recorded problem', async () => {
    const layer = idempotent(store, { now: () => 0 });
    const decision = await layer.begin(request);
    if (decision.action !== 'run') throw new Error(`expected to run, got ${decision.action}`);
    store.close();
    const result = await decision.execution.complete({ status: 201, body: { id: 1 } });
    expect(result.outcome).toBe('problem');
    if (result.outcome !== 'problem') return;
    expect(result.problem).toBeInstanceOf(AnswerNotRecordedError);
    expect((result.problem as AnswerNotRecordedError).response.body).toEqual({ id: 1 });
    expect(result.response.status).toBe(500);
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
      body: 'ok',
    });
  });

  it('lets a waiting duplicate run once the owner released the key after a failure', async () => {
    const layer = idempotent(store, { now: () => 0, wait: { timeoutMs: 10_000, intervalMs: 5 } });
    const owner = await layer.begin(request);
    if (owner.action !== 'run') throw new Error(`expected to run, got ${owner.action}`);
    const waiter = layer.begin(request);
    await owner.execution.fail(new Error('boom'));
    const next = await waiter;
    expect(next.action).toBe('run');
    expect(store.get('k1')?.status).toBe('pending');
  });
});
