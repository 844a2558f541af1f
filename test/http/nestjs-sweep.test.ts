import 'reflect-metadata';
import { describe, expect, it } from 'vitest';
import { IdempotencyModule } from '../../src/http/nestjs.js';
import { InvalidOptionError, SWEEPER_LEASE_KEY } from '../../src/index.js';
import { openSqliteStore } from '../../src/sqlite/index.js';
import { startNestApp } from '../support/nest-app.js';
import { freshDbPath, tempDir } from '../support/temp.js';
import { until } from '../support/waiting.js';

const dir = tempDir('idem-nest-sweep-');
const NOW = 1_000;

describe('IdempotencyModule.forRoot({ sweep })', () => {
  it('sweeps expired answers while the application runs and stops with it', async () => {
    const store = openSqliteStore(freshDbPath(dir));
    for (let i = 0; i < 12; i++) {
      store.reserve(`k${i}`, 'fp', NOW - 1);
      store.finish(`k${i}`, 'fp', i);
    }
    let sweeps = 0;
    const app = await startNestApp('express', {
      imports: [
        IdempotencyModule.forRoot({
          store,
          sweep: { intervalSeconds: 0.01, now: () => NOW, onSweep: () => void sweeps++ },
        }),
      ],
    });
    await until(() => store.stats(NOW).expired === 0);
    await app.close();
    const after = sweeps;
    // Closed with the application: the store is still open, yet nothing sweeps any more.
    store.reserve('late', 'fp', NOW - 1);
    store.finish('late', 'fp', 1);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(sweeps).toBe(after);
    expect(store.stats(NOW).expired).toBe(1);
    expect(store.get(SWEEPER_LEASE_KEY)).toBeNull();
    store.close();
  });

  it('refuses a store without leases, with or without a sweep', () => {
    // The IdempotencyStore contract alone: reserve, finish, sweepBatch, … but no acquire.
    const store = { reserve: () => true, finish: () => true, sweepBatch: () => 0 };
    expect(() => IdempotencyModule.forRoot({ store: store as never, sweep: true })).toThrow(
      InvalidOptionError,
    );
    expect(() => IdempotencyModule.forRoot({ store: store as never })).toThrow(
      'IdempotencyModule needs a `store` (a LeasedIdempotencyStore)',
    );
  });
});
