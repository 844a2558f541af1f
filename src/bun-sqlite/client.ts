import type { AnySqliteDatabase } from '../core/drizzle-types.js';

/** A bun:sqlite prepared statement, as the store uses it. */
export interface BunSqliteStatementLike {
  run(...args: unknown[]): { readonly changes: number };
  all(...args: unknown[]): unknown[];
  /** The first row, or `null` when there is none. */
  get(...args: unknown[]): unknown;
}

/**
 * The part of a `bun:sqlite` `Database` the store uses, spelled out so that the library compiles
 * and loads without Bun's types or runtime.
 */
export interface BunSqliteDatabaseLike {
  prepare(sql: string): BunSqliteStatementLike;
  transaction<A extends unknown[], R>(
    body: (...args: A) => R,
  ): { immediate(...args: A): R } & ((...args: A) => R);
  close(): void;
}

/** Any drizzle database over bun:sqlite (`drizzle({ client: new Database(path) })` from `drizzle-orm/bun-sqlite`). */
export type AnyBunSqliteDatabase = AnySqliteDatabase & {
  $client: BunSqliteDatabaseLike;
};
