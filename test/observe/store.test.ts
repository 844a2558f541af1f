import { metrics, SpanStatusCode, trace } from '@opentelemetry/api';
import type { Histogram } from '@opentelemetry/sdk-metrics';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type IdempotencyStore, InvalidOptionError, sweep } from '../../src/index.js';
import { instrumentStore, StoreMetric } from '../../src/observe/index.js';
import { openSqliteStore, type SqliteIdempotencyStore } from '../../src/sqlite/index.js';
import { tokenOf } from '../contract/lease-contract.js';
import { type OtelHarness, otelHarness, type Point } from '../support/otel.js';
import { pgliteHarness } from '../support/pg.js';
import { freshDbPath, tempDir } from '../support/temp.js';

const dir = tempDir('idem-observe-');
let otel: OtelHarness;
let sqlite: SqliteIdempotencyStore<unknown>;

beforeEach(() => {
  otel = otelHarness();
  sqlite = openSqliteStore(freshDbPath(dir));
});

afterEach(async () => {
  sqlite.close();
  await otel.shutdown();
});

function histogramCount(points: Point[] | undefined, operation: string): number {
  const point = points?.find((p) => p.attributes['idempotency.operation'] === operation);
  return point === undefined ? 0 : (point.value as Histogram).count;
}

function counterSum(points: Point[] | undefined): number {
  return (points ?? []).reduce((sum, point) => sum + (point.value as number), 0);
}

describe('instrumentStore', () => {
  it('traces and times every operation of a SQLite store, which stays synchronous', async () => {
    const store = instrumentStore(sqlite, {
      dialect: 'sqlite',
      tracerProvider: otel.tracerProvider,
      meterProvider: otel.meterProvider,
    });
    expect(store.reserve('secret-key', 'd1', 100)).toBe(true);
    expect(store.reserve('secret-key', 'd1', 100)).toBe(false);
    expect(store.finish('secret-key', 'd1', { ok: 1 })).toBe(true);
    expect(store.fetch('secret-key', 50)).toEqual({ ok: 1 });

    const spans = otel.spans();
    expect(spans.map((span) => span.name)).toEqual([
      'idempotency.store.reserve',
      'idempotency.store.reserve',
      'idempotency.store.finish',
      'idempotency.store.fetch',
    ]);
    expect(spans[0]?.attributes).toEqual({
      'idempotency.operation': 'reserve',
      'idempotency.dialect': 'sqlite',
      'idempotency.result': true,
    });
    expect(spans[1]?.attributes['idempotency.result']).toBe(false);
    for (const span of spans) {
      expect(JSON.stringify(span.attributes)).not.toContain('secret-key');
      expect(span.status.code).toBe(SpanStatusCode.UNSET);
    }

    const points = (await otel.metrics()).get(StoreMetric.duration);
    expect(histogramCount(points, 'reserve')).toBe(2);
    expect(histogramCount(points, 'finish')).toBe(1);
    expect(histogramCount(points, 'fetch')).toBe(1);
    expect(points?.every((point) => point.attributes['idempotency.dialect'] === 'sqlite')).toBe(
      true,
    );
  });

  it('records the key only when told to', () => {
    const store = instrumentStore(sqlite, {
      dialect: 'sqlite',
      recordKeys: true,
      tracerProvider: otel.tracerProvider,
      meterProvider: otel.meterProvider,
    });
    store.reserve('k1', 'd1', 100);
    store.counts();
    const [reserve, counts] = otel.spans();
    expect(reserve?.attributes['idempotency.key']).toBe('k1');
    expect(counts?.attributes['idempotency.key']).toBeUndefined();
  });

  it('marks a failed operation with its error code, never its message, and rethrows', async () => {
    const store = instrumentStore(sqlite, {
      dialect: 'sqlite',
      tracerProvider: otel.tracerProvider,
      meterProvider: otel.meterProvider,
    });
    expect(() => store.reserve('', 'd1', 100)).toThrow(/key/);
    sqlite.close();
    expect(() => store.get('secret-key')).toThrow(/closed/);
    const [invalid, closed] = otel.spans();
    expect(invalid?.status).toEqual({
      code: SpanStatusCode.ERROR,
      message: 'IDEMPOTENCY_INVALID_KEY',
    });
    expect(closed?.attributes['error.type']).toBe('IDEMPOTENCY_STORE_CLOSED');
    expect(JSON.stringify([closed?.attributes, closed?.status, closed?.events])).not.toContain(
      'secret-key',
    );
    const points = (await otel.metrics()).get(StoreMetric.duration);
    expect(
      points?.find((point) => point.attributes['error.type'] === 'IDEMPOTENCY_STORE_CLOSED'),
    ).toBeDefined();
  });

  it('counts the rows and batches a sweep over the wrapped store deletes', async () => {
    for (let i = 0; i < 25; i += 1) {
      const key = `k${String(i).padStart(2, '0')}`;
      sqlite.reserve(key, 'd', 10);
      sqlite.finish(key, 'd', i);
    }
    sqlite.reserve('still-pending', 'd', 10);
    const store = instrumentStore(sqlite, {
      dialect: 'sqlite',
      tracerProvider: otel.tracerProvider,
      meterProvider: otel.meterProvider,
    });
    const result = await sweep(store, { now: 20, batchSize: 10 });
    expect(result).toMatchObject({ deleted: 25, batches: 3, remaining: 0 });
    expect(store.purge(20)).toEqual([]);
    const collected = await otel.metrics();
    expect(counterSum(collected.get(StoreMetric.sweepDeleted))).toBe(25);
    expect(counterSum(collected.get(StoreMetric.sweepBatches))).toBe(3);
    expect(histogramCount(collected.get(StoreMetric.duration), 'sweepBatch')).toBe(3);
    expect(histogramCount(collected.get(StoreMetric.duration), 'stats')).toBe(2);
  });

  it('counts an acquire that takes over a lapsed lease, and marks its span', async () => {
    const store = instrumentStore(sqlite, {
      dialect: 'sqlite',
      tracerProvider: otel.tracerProvider,
      meterProvider: otel.meterProvider,
    });
    const first = store.acquire('k1', 'd1', { expires: 1_000, now: 10, leaseSeconds: 5 });
    expect(first).toMatchObject({ status: 'acquired', takenOver: false });
    expect(store.acquire('k1', 'd1', { expires: 1_000, now: 12, leaseSeconds: 5 }).status).toBe(
      'inProgress',
    );
    const taken = store.acquire('k1', 'd1', { expires: 1_000, now: 20, leaseSeconds: 5 });
    expect(taken).toMatchObject({ status: 'acquired', takenOver: true });
    expect(tokenOf(taken)).toBeGreaterThan(tokenOf(first));
    expect(otel.spans().map((span) => span.attributes)).toEqual([
      expect.objectContaining({ 'idempotency.result': 'acquired' }),
      expect.objectContaining({ 'idempotency.result': 'inProgress' }),
      expect.objectContaining({ 'idempotency.result': 'acquired', 'idempotency.taken_over': true }),
    ]);
    expect(otel.spans()[0]?.attributes['idempotency.taken_over']).toBeUndefined();
    expect(counterSum((await otel.metrics()).get(StoreMetric.takeovers))).toBe(1);
  });

  it('traces an asynchronous PostgreSQL store (PGlite) the same way', async () => {
    const harness = await pgliteHarness()();
    try {
      const store: IdempotencyStore<unknown> = instrumentStore(harness.store, {
        dialect: 'postgresql',
        tracerProvider: otel.tracerProvider,
        meterProvider: otel.meterProvider,
      });
      expect(await store.reserve('k1', 'd1', 100)).toBe(true);
      expect(await store.get('k1')).toMatchObject({ status: 'pending' });
      await expect(store.finish('k1', '', 1)).rejects.toThrow(/fingerprint/);
      const spans = otel.spans();
      expect(spans.map((span) => span.name)).toEqual([
        'idempotency.store.reserve',
        'idempotency.store.get',
        'idempotency.store.finish',
      ]);
      expect(spans[2]?.attributes['error.type']).toBe('IDEMPOTENCY_INVALID_FINGERPRINT');
      const points = (await otel.metrics()).get(StoreMetric.duration);
      expect(histogramCount(points, 'get')).toBe(1);
      expect(points?.[0]?.attributes['idempotency.dialect']).toBe('postgresql');
    } finally {
      await harness.close();
    }
  });

  it('uses the globally registered providers by default', async () => {
    expect(trace.setGlobalTracerProvider(otel.tracerProvider)).toBe(true);
    expect(metrics.setGlobalMeterProvider(otel.meterProvider)).toBe(true);
    try {
      const store = instrumentStore(sqlite, { dialect: 'sqlite' });
      store.counts();
      expect(otel.spans().map((span) => span.name)).toEqual(['idempotency.store.counts']);
      expect(histogramCount((await otel.metrics()).get(StoreMetric.duration), 'counts')).toBe(1);
    } finally {
      trace.disable();
      metrics.disable();
    }
  });

  it('refuses a missing dialect and a non-boolean recordKeys', () => {
    expect(() => instrumentStore(sqlite, {} as never)).toThrow(InvalidOptionError);
    expect(() =>
      instrumentStore(sqlite, { dialect: 'sqlite', recordKeys: 'yes' as never }),
    ).toThrow(InvalidOptionError);
  });
});
