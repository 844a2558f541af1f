import { SpanStatusCode } from '@opentelemetry/api';
import type { Histogram } from '@opentelemetry/sdk-metrics';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { fetchIdempotency } from '../../src/http/fetch.js';
import { type IdempotentRequest, idempotent, type OutcomeEvent } from '../../src/http/index.js';
import { InvalidOptionError } from '../../src/index.js';
import { RequestMetric, requestTelemetry } from '../../src/observe/index.js';
import { openSqliteStore, type SqliteIdempotencyStore } from '../../src/sqlite/index.js';
import { failingFinish } from '../support/failing-store.js';
import { type OtelHarness, otelHarness } from '../support/otel.js';
import { freshDbPath, tempDir } from '../support/temp.js';
import { until } from '../support/waiting.js';

const dir = tempDir('idem-observe-requests-');
let otel: OtelHarness;
let store: SqliteIdempotencyStore<unknown>;

beforeEach(() => {
  otel = otelHarness();
  store = openSqliteStore(freshDbPath(dir));
});

afterEach(async () => {
  store.close();
  await otel.shutdown();
});

function request(key: string | undefined, body: unknown): IdempotentRequest {
  return {
    method: 'POST',
    path: '/pay',
    headers: key === undefined ? {} : { 'idempotency-key': key },
    body,
  };
}

async function outcomeCounts(): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (const point of (await otel.metrics()).get(RequestMetric.outcomes) ?? []) {
    counts[String(point.attributes['idempotency.outcome'])] = point.value as number;
  }
  return counts;
}

describe('requestTelemetry', () => {
  it('records a span and an outcome for every request through the layer', async () => {
    const onOutcome = requestTelemetry({
      tracerProvider: otel.tracerProvider,
      meterProvider: otel.meterProvider,
    });
    const layer = idempotent(store, { onOutcome });
    const broken = idempotent(failingFinish(store), { onOutcome });
    const created = async () => ({ status: 201, body: { ok: true } });

    expect((await layer.handle(request('secret-1', { a: 1 }), created)).outcome).toBe('executed');
    expect((await layer.handle(request('secret-1', { a: 1 }), created)).outcome).toBe('replayed');
    expect((await layer.handle(request('secret-1', { a: 2 }), created)).response.status).toBe(422);
    expect((await layer.handle(request(undefined, {}), created)).response.status).toBe(400);
    await layer.handle(request('k5', {}), async () => ({ status: 503 }));
    await expect(
      layer.handle(request('k6', {}), async () => {
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    expect((await broken.handle(request('k7', {}), created)).response.status).toBe(500);
    let release = () => {};
    const first = layer.handle(request('k8', {}), async () => {
      await new Promise<void>((resolve) => {
        release = resolve;
      });
      return { status: 201 };
    });
    await until(() => store.get('k8')?.status === 'pending');
    expect((await layer.handle(request('k8', {}), created)).response.status).toBe(409);
    release();
    await first;

    expect(await outcomeCounts()).toEqual({
      executed: 2,
      replayed: 1,
      mismatch: 1,
      'key-missing': 1,
      'not-stored': 1,
      failed: 1,
      'not-recorded': 1,
      'in-progress': 1,
    });
    const spans = otel.spans();
    expect(spans).toHaveLength(9);
    for (const span of spans) {
      expect(span.name).toBe(RequestMetric.span);
      expect(JSON.stringify(span.attributes)).not.toContain('secret-1');
    }
    expect(spans[0]?.attributes).toEqual({
      'idempotency.outcome': 'executed',
      'idempotency.scoped': false,
      'http.request.method': 'POST',
      'http.response.status_code': 201,
    });
    const notRecorded = spans.find((s) => s.attributes['idempotency.outcome'] === 'not-recorded');
    expect(notRecorded?.status.code).toBe(SpanStatusCode.ERROR);
    const durations = (await otel.metrics()).get(RequestMetric.duration) ?? [];
    expect(durations.reduce((sum, point) => sum + (point.value as Histogram).count, 0)).toBe(9);
  });

  it('says whether a request had a scope, never what the scope was', async () => {
    const layer = idempotent(store, {
      onOutcome: requestTelemetry({
        tracerProvider: otel.tracerProvider,
        meterProvider: otel.meterProvider,
      }),
    });
    const scoped = { ...request('s1', {}), scope: 'tenant-secret' };
    await layer.handle(scoped, async () => ({ status: 201 }));
    await layer.handle(request('s2', {}), async () => ({ status: 201 }));
    const spans = otel.spans();
    expect(spans.map((span) => span.attributes['idempotency.scoped'])).toEqual([true, false]);
    expect(JSON.stringify(spans.map((span) => span.attributes))).not.toContain('tenant-secret');
  });

  it('records the key only when told to, and calls next even when it throws', async () => {
    const heard: OutcomeEvent[] = [];
    const layer = idempotent(store, {
      onOutcome: requestTelemetry({
        recordKeys: true,
        tracerProvider: otel.tracerProvider,
        meterProvider: otel.meterProvider,
        next: (event) => {
          heard.push(event);
          throw new Error('a broken logger');
        },
      }),
    });
    const result = await layer.handle(request('k1', {}), async () => ({ status: 201 }));
    expect(result.outcome).toBe('executed');
    expect(heard.map((event) => event.outcome)).toEqual(['executed']);
    expect(otel.spans()[0]?.attributes['idempotency.key']).toBe('k1');
  });

  it('hangs on an adapter through onOutcome, with the dialect on every signal', async () => {
    const handler = fetchIdempotency(store, {
      scope: 'global',
      onOutcome: requestTelemetry({
        dialect: 'sqlite',
        tracerProvider: otel.tracerProvider,
        meterProvider: otel.meterProvider,
      }),
    })(async () => Response.json({ ok: true }, { status: 201 }));
    const post = () =>
      handler(
        new Request('http://localhost/pay', {
          method: 'POST',
          headers: { 'idempotency-key': 'k1', 'content-type': 'application/json' },
          body: '{"a":1}',
        }),
      );
    expect((await post()).status).toBe(201);
    expect((await post()).headers.get('idempotent-replayed')).toBe('true');
    expect(await outcomeCounts()).toEqual({ executed: 1, replayed: 1 });
    expect(otel.spans().map((span) => span.attributes['idempotency.dialect'])).toEqual([
      'sqlite',
      'sqlite',
    ]);
  });

  it('counts a superseded owner and marks the run that took its key over', async () => {
    let clock = 1_000;
    const layer = idempotent(store, {
      now: () => clock,
      leaseSeconds: 30,
      onOutcome: requestTelemetry({
        tracerProvider: otel.tracerProvider,
        meterProvider: otel.meterProvider,
      }),
    });
    const first = await layer.begin(request('k1', { a: 1 }));
    if (first.action !== 'run') throw new Error(`expected to run, got ${first.action}`);
    clock += 31;
    const second = await layer.begin(request('k1', { a: 1 }));
    if (second.action !== 'run') throw new Error(`expected a takeover, got ${second.action}`);
    expect((await first.execution.complete({ status: 201 })).response.status).toBe(409);
    expect((await second.execution.complete({ status: 201 })).outcome).toBe('executed');

    const points = (await otel.metrics()).get(RequestMetric.outcomes) ?? [];
    expect(
      points
        .map((point) => [point.attributes, point.value])
        .sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b))),
    ).toEqual([
      [{ 'idempotency.outcome': 'executed', 'idempotency.taken_over': true }, 1],
      [{ 'idempotency.outcome': 'superseded' }, 1],
    ]);
    const superseded = otel
      .spans()
      .find((s) => s.attributes['idempotency.outcome'] === 'superseded');
    expect(superseded?.status.code).toBe(SpanStatusCode.ERROR);
  });

  it('refuses bad options', () => {
    expect(() => requestTelemetry({ dialect: '' })).toThrow(InvalidOptionError);
    expect(() => requestTelemetry({ recordKeys: 1 as never })).toThrow(InvalidOptionError);
    expect(() => requestTelemetry({ next: 'log' as never })).toThrow(InvalidOptionError);
  });
});
