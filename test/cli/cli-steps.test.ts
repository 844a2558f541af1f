// `idem pending` names the last step each pending key's handler recorded (docs/steps.md).
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { makeIdempotent } from '../../src/function/index.js';
import { openSqliteStore, sqliteSteps } from '../../src/sqlite/index.js';
import { idem } from '../support/cli.js';
import { freshDbPath, tempDir } from '../support/temp.js';

const dir = tempDir('idem-cli-steps-');

// Three pending keys: one whose handler failed after two steps, one after one, and one claimed
// by a handler that recorded none yet.
async function seeded(options: Parameters<typeof openSqliteStore>[1] = {}): Promise<string> {
  const path = freshDbPath(dir);
  const store = openSqliteStore(path, options);
  const pay = makeIdempotent(
    async (step, order: { id: string; steps: number }) => {
      await step('charge', () => `ch_${order.id}`);
      if (order.steps > 1) await step('ledger', () => 1);
      throw new Error('the handler failed after its steps');
    },
    {
      steps: sqliteSteps(store, { secret: 'a secret of at least sixteen bytes' }),
      key: (o) => o.id,
    },
  );
  await expect(pay({ id: 'a-two', steps: 2 })).rejects.toThrow(/after its steps/);
  await expect(pay({ id: 'b-one', steps: 1 })).rejects.toThrow(/after its steps/);
  store.acquire('c-none', 'fc', {
    expires: Date.now() / 1000 + 3600,
    now: Date.now() / 1000,
    leaseSeconds: 600,
  });
  store.close();
  return path;
}

describe('idem pending with steps', () => {
  it('shows the last recorded step of each key', async () => {
    const path = await seeded();
    const human = await idem(['pending', '--db', path]);
    expect(human.code).toBe(0);
    const lines = human.stdout.trim().split('\n');
    expect(lines).toHaveLength(3);
    expect(lines[0]).toMatch(/^a-two {2}lapsed .* {2}last step ledger$/);
    expect(lines[1]).toMatch(/^b-one {2}lapsed .* {2}last step charge$/);
    expect(lines[2]).toMatch(/^c-none {2}live /);
    expect(lines[2]).not.toMatch(/last step/);

    const json = await idem(['pending', '--db', path, '--json']);
    const rows = JSON.parse(json.stdout) as { key: string; lastStep: string | null }[];
    expect(rows.map((row) => [row.key, row.lastStep])).toEqual([
      ['a-two', 'ledger'],
      ['b-one', 'charge'],
      ['c-none', null],
    ]);
  });

  it('opens step records sealed under the keyring, and says when it cannot', async () => {
    const k1 = randomBytes(32);
    const path = await seeded({ encryption: { keys: { k1 }, current: 'k1' } });

    const keyring = { IDEM_ENCRYPTION_KEYS: `k1:${k1.toString('base64')}` };
    const opened = await idem(['pending', '--db', path, '--json'], keyring);
    expect(opened.code).toBe(0);
    const rows = JSON.parse(opened.stdout) as { key: string; lastStep: string | null }[];
    expect(rows.map((row) => [row.key, row.lastStep])).toEqual([
      ['a-two', 'ledger'],
      ['b-one', 'charge'],
      ['c-none', null],
    ]);

    const without = await idem(['pending', '--db', path]);
    expect(without.code).toBe(0);
    const lines = without.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^a-two .* {2}steps sealed under a key IDEM_ENCRYPTION_KEYS lacks$/);
    expect(lines[2]).not.toMatch(/steps sealed/);
  });
});
