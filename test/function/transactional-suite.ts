import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CallSupersededError,
  type IdempotencyStore,
  UnserializableResponseError,
} from '../../src/index.js';

/** One credit message: its id is the idempotency key. */
export interface Message {
  readonly id: string;
  readonly amount: number;
}

/** What a handler does inside the transaction, besides writing its effect row. */
export interface Behaviour {
  /** Throw after writing the effect. */
  readonly fail?: boolean;
  /** Delete the key's row (as a takeover or a manual release would) before returning. */
  readonly loseKey?: boolean;
  /** Return this instead of the default result. */
  readonly result?: unknown;
}

export interface Dialect {
  readonly store: IdempotencyStore<unknown>;
  credit(behaviour?: Behaviour): (message: Message) => Promise<unknown>;
  effects(): Promise<{ id: string; amount: number }[]>;
  close(): Promise<void>;
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
      await expect(d.credit({ result: { total: Number.NaN } })(m)).rejects.toBeInstanceOf(
        UnserializableResponseError,
      );
      expect((await d.effects()).some((e) => e.id === m.id)).toBe(false);
      expect(await d.store.get(m.id)).toBeNull();
    });

    it('rolls everything back when the key is no longer this call’s', async () => {
      const m = message();
      await expect(d.credit({ loseKey: true })(m)).rejects.toBeInstanceOf(CallSupersededError);
      expect((await d.effects()).some((e) => e.id === m.id)).toBe(false);
      // The rollback restored the pending row the call had claimed: its owner's, not this call's.
      expect((await d.store.get(m.id))?.status).toBe('pending');
    });
  });
}
