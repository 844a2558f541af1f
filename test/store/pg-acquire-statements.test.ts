import { PGlite } from '@electric-sql/pglite';
import type { Logger } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/pglite';
import { describe, expect, it } from 'vitest';
import { applyPgMigrations, PgIdempotencyStore } from '../../src/pg/index.js';

const fingerprint = 'd'.repeat(64);

// Every statement a store sends, as drizzle's logger sees it (a logger keeps the store on
// drizzle's path, which logs each one).
async function loggedStore() {
  const sent: string[] = [];
  const logger: Logger = { logQuery: (query) => sent.push(query) };
  const client = new PGlite();
  const db = drizzle({ client, logger });
  await applyPgMigrations(db);
  sent.length = 0;
  const store = new PgIdempotencyStore<{ n: number }>(db, { onClose: () => client.close() });
  return { store, sent };
}

describe('acquire on PostgreSQL, statement by statement', () => {
  it('claims a fresh key with one statement, and answers a replay with one that inserts nothing', async () => {
    const { store, sent } = await loggedStore();
    const claim = await store.acquire('k', fingerprint, { expires: 100, now: 1, leaseSeconds: 30 });
    expect(claim).toMatchObject({ status: 'acquired', leaseUntil: 31, takenOver: false });
    expect(sent).toHaveLength(1);
    if (claim.status !== 'acquired') return;
    expect(await store.finish('k', fingerprint, { n: 1 }, claim.fencingToken)).toBe(true);
    sent.length = 0;
    const replay = await store.acquire('k', fingerprint, {
      expires: 100,
      now: 2,
      leaseSeconds: 30,
    });
    expect(replay).toMatchObject({ status: 'done', record: { response: { n: 1 } } });
    expect(sent).toHaveLength(1);
    expect(sent[0]).toMatch(/on conflict do nothing/i);
    expect(await store.get('k')).toMatchObject({
      status: 'done',
      fencingToken: claim.fencingToken,
    });
    await store.close();
  });

  it('takes over a lapsed lease with a second statement, raising the token', async () => {
    const { store, sent } = await loggedStore();
    const first = await store.acquire('k', fingerprint, { expires: 100, now: 1, leaseSeconds: 30 });
    if (first.status !== 'acquired') throw new Error(`unexpected ${first.status}`);
    sent.length = 0;
    const live = await store.acquire('k', fingerprint, { expires: 100, now: 2, leaseSeconds: 30 });
    expect(live).toMatchObject({ status: 'inProgress', leaseUntil: 31 });
    expect(sent).toHaveLength(1);
    sent.length = 0;
    const taken = await store.acquire('k', fingerprint, {
      expires: 100,
      now: 31,
      leaseSeconds: 30,
    });
    expect(taken).toMatchObject({ status: 'acquired', leaseUntil: 61, takenOver: true });
    if (taken.status === 'acquired') expect(taken.fencingToken).toBeGreaterThan(first.fencingToken);
    expect(sent).toHaveLength(2);
    await store.close();
  });
});
