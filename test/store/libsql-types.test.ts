// Pins the public types of the libSQL store: the `expectTypeOf` assertions are checked by the
// compiler (`npm run typecheck`); the runtime assertions check that the values agree with them.

import { describe, expect, expectTypeOf, it } from 'vitest';
import type { Keyring } from '../../src/core/encryption.js';
import type {
  AcquireResult,
  IdempotencyRecord,
  LeasedIdempotencyStore,
  LeaseStats,
} from '../../src/index.js';
import {
  type LibsqlIdempotencyStore,
  type OpenLibsqlStoreOptions,
  openLibsqlStore,
  type SqliteKeysTable,
} from '../../src/libsql/index.js';
import { fileUrl } from '../support/libsql-harness.js';
import { freshDbPath, tempDir } from '../support/temp.js';

interface Receipt {
  charged: number;
}

const dir = tempDir('idem-libsql-types-');

describe('the libSQL store types', () => {
  it('returns a promise from every operation and keeps the answer type', async () => {
    expectTypeOf<LibsqlIdempotencyStore<Receipt>>().toExtend<LeasedIdempotencyStore<Receipt>>();
    expectTypeOf<OpenLibsqlStoreOptions>().toEqualTypeOf<{
      readonly busyTimeoutMs?: number;
      readonly authToken?: string;
      readonly table?: SqliteKeysTable;
      readonly encryption?: Keyring;
    }>();
    const store = await openLibsqlStore<Receipt>(fileUrl(freshDbPath(dir)));
    expectTypeOf(store).toEqualTypeOf<LibsqlIdempotencyStore<Receipt>>();
    const reserved = store.reserve('k', 'd', 10);
    expectTypeOf(reserved).toEqualTypeOf<Promise<boolean>>();
    expect(await reserved).toBe(true);
    const finished = store.finish('k', 'd', { charged: 1 });
    expectTypeOf(finished).toEqualTypeOf<Promise<boolean>>();
    expect(await finished).toBe(true);
    const fetched = store.fetch('k', 5);
    expectTypeOf(fetched).toEqualTypeOf<Promise<Receipt | null>>();
    expect(await fetched).toEqual({ charged: 1 });
    const record = store.get('k');
    expectTypeOf(record).toEqualTypeOf<Promise<IdempotencyRecord<Receipt> | null>>();
    expect(await record).toMatchObject({ key: 'k', response: { charged: 1 } });
    const stats = store.stats(5);
    expectTypeOf(stats).toEqualTypeOf<Promise<LeaseStats>>();
    expect(await stats).toMatchObject({ pending: 0, done: 1, expired: 0 });
    const acquired = store.acquire('j', 'd', { expires: 10, now: 0, leaseSeconds: 30 });
    expectTypeOf(acquired).toEqualTypeOf<Promise<AcquireResult<Receipt>>>();
    expect(await acquired).toEqual({
      status: 'acquired',
      fencingToken: expect.any(Number),
      leaseUntil: 30,
      takenOver: false,
    });
    const closed = store.close();
    expectTypeOf(closed).toEqualTypeOf<Promise<void>>();
    await closed;
  });
});
