import type { DurableObjectStorage } from '@cloudflare/workers-types/index.js';
import { drizzle } from 'drizzle-orm/durable-sqlite';
import { describe, expectTypeOf, it } from 'vitest';
import {
  type AnyDurableSqliteDatabase,
  DurableSqliteIdempotencyStore,
  type DurableSqliteStorageLike,
} from '../../src/durable-sqlite/index.js';

// The library spells out the part of a Durable Object's storage it uses instead of depending on
// Cloudflare's types; this pins that Cloudflare's own DurableObjectStorage, and drizzle over it,
// fit that shape.
describe('the Durable Object storage types', () => {
  it("accepts Cloudflare's DurableObjectStorage and drizzle(ctx.storage) over it", () => {
    expectTypeOf<DurableObjectStorage>().toExtend<DurableSqliteStorageLike>();
    const make = (storage: DurableObjectStorage) =>
      new DurableSqliteIdempotencyStore(drizzle(storage));
    expectTypeOf(make).returns.toEqualTypeOf<DurableSqliteIdempotencyStore<unknown>>();
    expectTypeOf<
      ReturnType<typeof drizzle<Record<string, never>, DurableObjectStorage>>
    >().toExtend<AnyDurableSqliteDatabase>();
  });
});
