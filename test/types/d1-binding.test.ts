import type { D1Database } from '@cloudflare/workers-types/index.js';
import { drizzle } from 'drizzle-orm/d1';
import { describe, expectTypeOf, it } from 'vitest';
import { type AnyD1Database, type D1DatabaseLike, D1IdempotencyStore } from '../../src/d1/index.js';

// The library spells out the part of the D1 binding it uses instead of depending on Cloudflare's
// types; this pins that Cloudflare's own D1Database, and drizzle over it, fit that shape.
describe('the D1 binding types', () => {
  it("accepts Cloudflare's D1Database and drizzle(env.DB) over it", () => {
    expectTypeOf<D1Database>().toExtend<D1DatabaseLike>();
    const make = (binding: D1Database) => new D1IdempotencyStore(drizzle(binding));
    expectTypeOf(make).returns.toEqualTypeOf<D1IdempotencyStore<unknown>>();
    expectTypeOf<
      ReturnType<typeof drizzle<Record<string, never>, D1Database>>
    >().toExtend<AnyD1Database>();
  });
});
