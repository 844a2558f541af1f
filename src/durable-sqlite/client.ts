import type { AnySqliteDatabase } from '../core/drizzle-types.js';

/** What the store reads of a Durable Object SQL cursor: its rows, as plain objects. */
export interface DurableSqliteCursorLike {
  toArray(): Record<string, unknown>[];
}

/**
 * The part of a Durable Object's storage (`ctx.storage`) the store uses, spelled out so that the
 * library needs neither `@cloudflare/workers-types` nor a driver package: the storage is the
 * driver.
 */
export interface DurableSqliteStorageLike {
  readonly sql: {
    exec(query: string, ...bindings: unknown[]): DurableSqliteCursorLike;
  };
  transactionSync<T>(closure: () => T): T;
}

/**
 * Any drizzle database over a Durable Object's storage (`drizzle(ctx.storage)` from
 * `drizzle-orm/durable-sqlite`).
 */
export type AnyDurableSqliteDatabase = AnySqliteDatabase & {
  $client: DurableSqliteStorageLike;
};
