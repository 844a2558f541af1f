import { describe, expect, it } from 'vitest';
import {
  type BatchedStatement,
  type BatchItem,
  StatementBatch,
} from '../../src/core/statement-batch.js';

// A statement over an in-memory map of counters: `one` and `many` add the item's argument to its
// key's counter and answer the new value, recording each statement's keys as sent.
function counters(options: { refuse?: unknown } = {}) {
  const values = new Map<string, number>();
  const sent: string[][] = [];
  const add = ({ key, args }: BatchItem<number>) => {
    const value = (values.get(key) ?? 0) + args;
    values.set(key, value);
    return value;
  };
  const statement: BatchedStatement<number, number> = {
    one: async (item) => {
      sent.push([item.key]);
      if (item.args < 0) throw new Error(`negative ${item.key}`);
      return add(item);
    },
    many: async (items) => {
      sent.push(items.map((item) => item.key));
      if (options.refuse !== undefined && items.some((item) => item.args < 0)) {
        throw options.refuse;
      }
      return items.map(add);
    },
  };
  return { statement, sent, values };
}

// A server's refusal as node-postgres reports it: a severity and a SQLSTATE.
const refusal = Object.assign(new Error('check constraint'), { severity: 'ERROR', code: '23514' });

describe('StatementBatch', () => {
  it('sends the first call of a quiet turn at once, the rest of the turn as one statement, keys ascending', async () => {
    const { statement, sent } = counters();
    const batch = new StatementBatch(statement, 100);
    const results = await Promise.all([batch.run('c', 3), batch.run('a', 1), batch.run('b', 2)]);
    expect(results).toEqual([3, 1, 2]);
    expect(sent).toEqual([['c'], ['a', 'b']]);
    // The last turn was a burst: this one waits for its batch, first call included.
    expect(await Promise.all([batch.run('f', 6), batch.run('d', 4), batch.run('e', 5)])).toEqual([
      6, 4, 5,
    ]);
    expect(sent.slice(2)).toEqual([['d', 'e', 'f']]);
    expect(batch.sizes()).toEqual({ calls: 6, statements: 3, sizes: { 1: 1, 2: 1, 3: 1 } });
  });

  it('sends a lone call as the single-row statement', async () => {
    const { statement, sent } = counters();
    const batch = new StatementBatch(statement, 100);
    expect(await batch.run('a', 5)).toBe(5);
    expect(sent).toEqual([['a']]);
    expect(batch.sizes().sizes).toEqual({ 1: 1 });
  });

  it('runs the calls of one key one after the other, in call order, each seeing the one before', async () => {
    const { statement, sent } = counters();
    const batch = new StatementBatch(statement, 100);
    const results = await Promise.all([
      batch.run('a', 1),
      batch.run('b', 10),
      batch.run('a', 2),
      batch.run('a', 4),
    ]);
    expect(results).toEqual([1, 10, 3, 7]);
    // The first `a` was answered before the turn ended; the second rides with `b`, the third
    // waits for it.
    expect(sent).toEqual([['a'], ['a', 'b'], ['a']]);
  });

  it('holds a key back while a statement carrying it is unanswered, even from a later turn', async () => {
    let open: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    const sent: string[] = [];
    const batch = new StatementBatch<number, string>(
      {
        one: async ({ key }) => {
          sent.push(key);
          if (sent.length === 1) await gate;
          return `${key}${sent.length}`;
        },
        many: async () => {
          throw new Error('no batch here');
        },
      },
      100,
    );
    const first = batch.run('a', 1);
    await new Promise((resolve) => setImmediate(resolve));
    const second = batch.run('a', 2);
    const other = batch.run('b', 5);
    expect(await other).toBe('b2');
    expect(sent).toEqual(['a', 'b']);
    open();
    expect(await Promise.all([first, second])).toEqual(['a2', 'a3']);
    expect(sent).toEqual(['a', 'b', 'a']);
  });

  it('carries at most maxSize calls per statement', async () => {
    const { statement, sent } = counters();
    const batch = new StatementBatch(statement, 2);
    await Promise.all(['a', 'b', 'c', 'd', 'e'].map((key) => batch.run(key, 1)));
    expect(sent).toEqual([['a'], ['b', 'c'], ['d', 'e']]);
    expect(batch.sizes()).toEqual({ calls: 5, statements: 3, sizes: { 1: 1, 2: 2 } });
  });

  it('runs each call of a statement the server refused alone: only the bad one fails', async () => {
    const { statement, sent, values } = counters({ refuse: refusal });
    const batch = new StatementBatch(statement, 100);
    const settled = await Promise.allSettled([
      batch.run('a', 1),
      batch.run('b', -1),
      batch.run('c', 3),
      batch.run('d', 4),
    ]);
    expect(settled.map((result) => result.status)).toEqual([
      'fulfilled',
      'rejected',
      'fulfilled',
      'fulfilled',
    ]);
    expect((settled[1] as PromiseRejectedResult).reason).toEqual(new Error('negative b'));
    expect(sent).toEqual([['a'], ['b', 'c', 'd'], ['b'], ['c'], ['d']]);
    expect(Object.fromEntries(values)).toEqual({ a: 1, c: 3, d: 4 });
  });

  it('also when drizzle wrapped the refusal', async () => {
    const wrapped = Object.assign(new Error('Failed query'), { cause: refusal });
    const { statement } = counters({ refuse: wrapped });
    const batch = new StatementBatch(statement, 100);
    const settled = await Promise.allSettled([
      batch.run('a', 1),
      batch.run('b', -1),
      batch.run('c', 3),
    ]);
    expect(settled.map((result) => result.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
  });

  it('fails every call with an error that is not a refusal: the outcome is unknown', async () => {
    // A connection error's errno code looks like a SQLSTATE, but no server sent it.
    const lost = Object.assign(new Error('write EPIPE'), { code: 'EPIPE' });
    const { statement, sent } = counters({ refuse: lost });
    const batch = new StatementBatch(statement, 100);
    const settled = await Promise.allSettled([
      batch.run('a', 1),
      batch.run('b', -1),
      batch.run('c', 3),
    ]);
    expect(settled).toEqual([
      { status: 'fulfilled', value: 1 },
      { status: 'rejected', reason: lost },
      { status: 'rejected', reason: lost },
    ]);
    expect(sent).toEqual([['a'], ['b', 'c']]);
  });
});
