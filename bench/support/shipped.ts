// The library as its users run it: the built package in dist/ (`npm run bench` builds it first),
// through its public entry points. Not the sources through tsx: tsx's transform passes every
// function created at run time through a naming helper (`__name`), a cost per closure, several
// per request, that the published build does not have and that no peer pays. Types come from the
// sources the build is made of; the raw sides of a comparison may still import internals from
// src/, since those only name tables and statuses.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

async function load<M>(entry: string): Promise<M> {
  const url = new URL(`../../dist/${entry}.js`, import.meta.url);
  if (!existsSync(fileURLToPath(url))) {
    throw new Error(`dist/${entry}.js is missing: build the package first (npm run bench does)`);
  }
  return (await import(url.href)) as M;
}

/** `drizzle-idempotency`, built. */
export const shippedCore = await load<typeof import('../../src/index.js')>('index');
/** `drizzle-idempotency/sqlite`, built. */
export const shippedSqlite = await load<typeof import('../../src/sqlite/index.js')>('sqlite/index');
/** `drizzle-idempotency/pg`, built. */
export const shippedPg = await load<typeof import('../../src/pg/index.js')>('pg/index');
/** `drizzle-idempotency/mysql`, built. */
export const shippedMysql = await load<typeof import('../../src/mysql/index.js')>('mysql/index');
/** `drizzle-idempotency/http`, built. */
export const shippedHttp = await load<typeof import('../../src/http/index.js')>('http/index');
/** `drizzle-idempotency/express`, built. */
export const shippedExpress =
  await load<typeof import('../../src/http/express.js')>('http/express');
/** `drizzle-idempotency/function`, built. */
export const shippedFunction =
  await load<typeof import('../../src/function/index.js')>('function/index');
