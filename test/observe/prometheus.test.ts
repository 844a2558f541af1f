import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { InvalidOptionError, InvalidTimeError } from '../../src/index.js';
import { formatPrometheusStats, prometheusStats } from '../../src/observe/index.js';
import { openSqliteStore, type SqliteIdempotencyStore } from '../../src/sqlite/index.js';
import { freshDbPath, tempDir } from '../support/temp.js';

const dir = tempDir('idem-prometheus-');
let store: SqliteIdempotencyStore<unknown>;

beforeEach(() => {
  store = openSqliteStore(freshDbPath(dir));
});

afterEach(() => {
  store.close();
});

// One line of the text exposition format: a name, optional labels, a value.
const SAMPLE =
  /^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\n"])*"(,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\n"])*")*\})? -?\d+(\.\d+)?$/;

describe('Prometheus stats', () => {
  it('prints the store gauges at now in the text exposition format', async () => {
    store.reserve('done-live', 'd', 100);
    store.finish('done-live', 'd', 1);
    store.reserve('done-expired', 'd', 10);
    store.finish('done-expired', 'd', 1);
    store.reserve('pending-live', 'd', 100);
    store.reserve('pending-stale', 'd', 10);
    const text = await prometheusStats(store, 50);
    // A store that keeps leases counts lapsed and unrecorded keys too: none here (`reserve` takes
    // no lease).
    const leases =
      'lapsed' in (await store.stats(50))
        ? [
            '# HELP idempotency_lapsed_pending_keys Pending keys whose lease lapsed: their owner stopped renewing, the next retry takes them over.',
            '# TYPE idempotency_lapsed_pending_keys gauge',
            'idempotency_lapsed_pending_keys 0',
            '# HELP idempotency_unrecorded_keys Pending keys whose handler ran but whose answer was not recorded: each waits for an operator.',
            '# TYPE idempotency_unrecorded_keys gauge',
            'idempotency_unrecorded_keys 0',
          ]
        : [];
    expect(text).toBe(
      [
        '# HELP idempotency_pending_keys Keys whose work is in flight (status pending).',
        '# TYPE idempotency_pending_keys gauge',
        'idempotency_pending_keys 2',
        '# HELP idempotency_done_keys Keys holding a stored answer (status done), expired or not.',
        '# TYPE idempotency_done_keys gauge',
        'idempotency_done_keys 2',
        '# HELP idempotency_expired_keys Done keys past their retention deadline: the backlog a sweep deletes.',
        '# TYPE idempotency_expired_keys gauge',
        'idempotency_expired_keys 1',
        '# HELP idempotency_stale_pending_keys Pending keys past their retention deadline: never deleted by retention, look at them.',
        '# TYPE idempotency_stale_pending_keys gauge',
        'idempotency_stale_pending_keys 1',
        ...leases,
        '',
      ].join('\n'),
    );
  });

  it('adds labels, escaped, and a prefix to every sample', () => {
    const text = formatPrometheusStats(
      { pending: 1, done: 2, expired: 3, stalePending: 4 },
      { prefix: 'payments_idem', labels: { table: 'keys', note: 'a "b"\\c\nd' } },
    );
    const samples = text.split('\n').filter((line) => line !== '' && !line.startsWith('#'));
    expect(samples).toHaveLength(4);
    for (const line of samples) expect(line).toMatch(SAMPLE);
    expect(samples[2]).toBe('payments_idem_expired_keys{table="keys",note="a \\"b\\"\\\\c\\nd"} 3');
  });

  it('adds the lease gauges for a store that counts lapsed and unrecorded keys', () => {
    const text = formatPrometheusStats({
      pending: 5,
      done: 2,
      expired: 1,
      stalePending: 0,
      lapsed: 3,
      unrecorded: 1,
    });
    expect(text).toContain(
      '# TYPE idempotency_lapsed_pending_keys gauge\nidempotency_lapsed_pending_keys 3\n',
    );
    expect(text).toContain(
      '# TYPE idempotency_unrecorded_keys gauge\nidempotency_unrecorded_keys 1\n',
    );
  });

  it('refuses bad options and a bad now before reading the store', async () => {
    store.close();
    await expect(prometheusStats(store, Number.NaN)).rejects.toThrow(InvalidTimeError);
    await expect(prometheusStats(store, 1, { prefix: '9lives' })).rejects.toThrow(
      InvalidOptionError,
    );
    await expect(prometheusStats(store, 1, { labels: { 'bad-name': 'x' } })).rejects.toThrow(
      InvalidOptionError,
    );
    await expect(prometheusStats(store, 1, { labels: { __name__: 'x' } })).rejects.toThrow(
      InvalidOptionError,
    );
    await expect(prometheusStats(store, 1, { labels: { n: 1 as never } })).rejects.toThrow(
      InvalidOptionError,
    );
  });
});
