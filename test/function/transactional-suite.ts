import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CallSupersededError } from '../../src/function/index.js';
import { type IdempotencyStore, UnserializableResponseError } from '../../src/index.js';

/** One credit message: its id is the idempotency key. */
export interface Message {
  readonly id: string;
  readonly amount: number;
}

/** What a handler does inside the transaction, besides writing its effect row. */
interface Behaviour {
  /** Throw after writing the effect. */
  readonly fail?: boolean;
  /** Delete the key's row (as a takeover or a manual release would) before returning. */
  readonly loseKey?: boolean;
  /** Return this instead of the default result. */
  readonly result?: unknown;
  /**
   * Write the effect row under this id instead of the message's: when it is taken, catch the
   * unique violation and return `{ conflict: id }`, as an HTTP handler turns one into a 409.
   */
  readonly effectId?: string;
  /** Wait a few milliseconds inside the transaction after writing (asynchronous handlers only). */
  readonly linger?: boolean;
}

/**
 * A database with an `effects` table, and a transactional store on a table that is not the
 * dialect's default one (another name, or another schema), so a runner that ignored its store's
 * table would miss it.
 */
export interface Dialect {
  readonly store: IdempotencyStore<unknown>;
  credit(behaviour?: Behaviour): (message: Message) => Promise<unknown>;
  effects(): Promise<{ id: string; amount: number }[]>;
  /** The rows of a default keys table beside the store's, or `undefined` when there is none. */
  defaultKeys(): Promise<number | undefined>;
  close(): Promise<void>;
}

/** Resolves after a few milliseconds, so a transaction stays open while other calls come in. */
export function linger(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 5));
}

/** The transactional makeIdempotent suite, run on each dialect. */
export function transactionalSuite(
  dialects: { name: string; open: () => Promise<Dialect> }[],
): void {
  describe.each(dialects)('transactional makeIdempotent on $name', ({ open }) => {
    let d: Dialect;
    beforeAll(async () => {
      d = await open();
    });
    afterAll(async () => d?.close());
    let counter = 0;
    const message = (amount = 5): Message => {
      counter += 1;
      return { id: `m${counter}`, amount };
    };

    it('commits the effect and the result together, and replays without running', async () => {
      const credit = d.credit();
      const m = message(7);
      expect(await credit(m)).toEqual({ credited: 7 });
      expect(await credit(m)).toEqual({ credited: 7 });
      expect((await d.effects()).filter((e) => e.id === m.id)).toEqual([m]);
      const record = await d.store.get(m.id);
      expect(record?.status).toBe('done');
      expect(record?.response).toEqual({ value: { credited: 7 } });
    });

    it('rolls a throwing handler back and releases the key', async () => {
      const m = message();
      await expect(d.credit({ fail: true })(m)).rejects.toThrow('handler failed');
      expect((await d.effects()).some((e) => e.id === m.id)).toBe(false);
      expect(await d.store.get(m.id)).toBeNull();
      expect(await d.credit()(m)).toEqual({ credited: 5 });
      expect((await d.effects()).filter((e) => e.id === m.id)).toHaveLength(1);
    });

    it('rolls back a result that cannot be stored, and releases the key', async () => {
      const m = message();
      await expect(d.credit({ result: { byId: new Map() } })(m)).rejects.toBeInstanceOf(
        UnserializableResponseError,
      );
      expect((await d.effects()).some((e) => e.id === m.id)).toBe(false);
      expect(await d.store.get(m.id)).toBeNull();
    });

    it('records in the store’s own table and nothing in a default keys table', async () => {
      const m = message(3);
      expect(await d.credit()(m)).toEqual({ credited: 3 });
      // A replay comes from the store's table: the handler would throw if it ran.
      expect(await d.credit({ fail: true })(m)).toEqual({ credited: 3 });
      expect(await d.store.get(m.id)).toMatchObject({ status: 'done' });
      expect([0, undefined]).toContain(await d.defaultKeys());
    });

    it('stores the answer of a handler that catches its own unique violation, and replays it', async () => {
      const taken = message();
      await d.credit()(taken);
      const m = message();
      expect(await d.credit({ effectId: taken.id })(m)).toEqual({ conflict: taken.id });
      expect(await d.store.get(m.id)).toMatchObject({
        status: 'done',
        response: { value: { conflict: taken.id } },
      });
      expect(await d.credit({ fail: true })(m)).toEqual({ conflict: taken.id });
      expect((await d.effects()).filter((e) => e.id === taken.id)).toEqual([taken]);
      expect((await d.effects()).some((e) => e.id === m.id)).toBe(false);
    });

    it.each([2, 16])(
      'commits %i overlapping calls on distinct keys, each with its answer',
      async (count) => {
        const messages = Array.from({ length: count }, (_, i) => message(i + 1));
        const credit = d.credit({ linger: true });
        const outcomes = await Promise.allSettled(messages.map((m) => credit(m)));
        expect(outcomes).toEqual(
          messages.map((m) => ({ status: 'fulfilled', value: { credited: m.amount } })),
        );
        for (const m of messages) {
          expect(await d.store.get(m.id)).toMatchObject({
            status: 'done',
            response: { value: { credited: m.amount } },
          });
        }
        const ids = new Set(messages.map((m) => m.id));
        expect((await d.effects()).filter((e) => ids.has(e.id))).toHaveLength(count);
      },
    );

    it('rolls everything back when the key is no longer this call’s', async () => {
      const m = message();
      await expect(d.credit({ loseKey: true })(m)).rejects.toBeInstanceOf(CallSupersededError);
      expect((await d.effects()).some((e) => e.id === m.id)).toBe(false);
      // The rollback restored the pending row the call had claimed: its owner's, not this call's.
      expect((await d.store.get(m.id))?.status).toBe('pending');
    });
  });
}

/**
 * Whether `error` (or its cause, through drizzle's `DrizzleQueryError`) is a unique violation:
 * SQLite's constraint codes, PostgreSQL's 23505, MySQL's 1062.
 */
export function isUniqueViolation(error: unknown): boolean {
  for (let current = error; current instanceof Error; current = current.cause) {
    const { code, extendedCode, errno } = current as {
      code?: unknown;
      extendedCode?: unknown;
      errno?: unknown;
    };
    if (code === '23505' || errno === 1062) return true;
    if (
      [code, extendedCode].some(
        (value) => value === 'SQLITE_CONSTRAINT_PRIMARYKEY' || value === 'SQLITE_CONSTRAINT_UNIQUE',
      )
    )
      return true;
  }
  return false;
}
