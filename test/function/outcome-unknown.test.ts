import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { CallOutcomeUnknownError, makeIdempotent } from '../../src/function/index.js';
import {
  type IdempotencyStore,
  type LeasedIdempotencyStore,
  OutcomeUnknownError,
  resolveUnknownOutcome,
} from '../../src/index.js';
import { openSqliteStore } from '../../src/sqlite/index.js';
import { idem, jsonLine } from '../support/cli.js';
import { storeFactories } from '../support/store-factories.js';
import { freshDbPath, tempDir } from '../support/temp.js';

describe.each(storeFactories())(
  'makeIdempotent: an outcome declared unknown on $name',
  (factory) => {
    let store: LeasedIdempotencyStore<unknown>;
    let close: () => Promise<void>;

    beforeEach(async () => {
      let opened: IdempotencyStore<unknown>;
      ({ store: opened, close } = await factory.open());
      store = opened as LeasedIdempotencyStore<unknown>;
    });
    afterEach(async () => {
      await close();
    });

    it('holds the key: retries get CallOutcomeUnknownError and never run, until it is resolved or released', async () => {
      let runs = 0;
      const charge = makeIdempotent(
        async (_id: string) => {
          runs += 1;
          if (runs === 1) throw new OutcomeUnknownError('the provider timed out');
          return { receipt: runs };
        },
        { store, key: (id) => id },
      );
      await expect(charge('a')).rejects.toBeInstanceOf(OutcomeUnknownError);
      for (let retry = 0; retry < 2; retry++) {
        const error = await charge('a').catch((e: unknown) => e);
        expect(error).toBeInstanceOf(CallOutcomeUnknownError);
        expect((error as CallOutcomeUnknownError).code).toBe('IDEMPOTENCY_OUTCOME_UNKNOWN');
      }
      expect(runs).toBe(1);
      expect(await store.get('a')).toMatchObject({ status: 'pending', unrecorded: true });

      // The operator learnt the charge went through: its answer is what retries get.
      expect(await resolveUnknownOutcome(store, 'a', { value: { receipt: 77 } })).toBe('resolved');
      expect(await charge('a')).toEqual({ receipt: 77 });
      expect(await resolveUnknownOutcome(store, 'a', { receipt: 78 })).toBe('done');
      expect(await resolveUnknownOutcome(store, 'nothing', { receipt: 1 })).toBe('missing');
      expect(runs).toBe(1);
    });

    it('refuses to resolve a key whose owner may still be running', async () => {
      const held = await store.acquire('b', 'digest-b', {
        expires: 1e10,
        now: 1,
        leaseSeconds: 30,
      });
      expect(held.status).toBe('acquired');
      expect(await resolveUnknownOutcome(store, 'b', { receipt: 1 })).toBe('notUnrecorded');
      expect(await store.get('b')).toMatchObject({ status: 'pending', response: null });
    });
  },
);

describe('idem resolve', () => {
  const dir = tempDir('idem-resolve-');

  it('stores the answer of a key held as unrecorded, and changes nothing for a bad file or another key', async () => {
    const path = freshDbPath(dir);
    const store = openSqliteStore(path);
    const charge = makeIdempotent(
      async (_id: string): Promise<{ receipt: number }> => {
        throw new OutcomeUnknownError();
      },
      { store, key: (id) => id },
    );
    await expect(charge('order-1')).rejects.toBeInstanceOf(OutcomeUnknownError);
    const answer = join(dir, 'answer.json');
    const broken = join(dir, 'broken.json');
    // The default codec keeps a plain JSON result as { value }.
    writeFileSync(answer, JSON.stringify({ value: { receipt: 5 } }));
    writeFileSync(broken, '{"receipt":');

    const bad = await idem(['resolve', 'order-1', '--answer', broken, '--db', path]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('is not JSON');
    const other = await idem(['resolve', 'order-2', '--answer', answer, '--json', '--db', path]);
    expect(other.code).toBe(1);
    expect(jsonLine(other).result).toBe('missing');
    expect(store.get('order-1')).toMatchObject({ status: 'pending', unrecorded: true });

    const resolved = await idem(['resolve', 'order-1', '--answer', answer, '--json', '--db', path]);
    expect(resolved.code).toBe(0);
    expect(jsonLine(resolved)).toEqual({ key: 'order-1', result: 'resolved' });
    expect(await charge('order-1')).toEqual({ receipt: 5 });
    store.close();
  });
});
