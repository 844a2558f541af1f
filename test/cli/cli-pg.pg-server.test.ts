import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { storedId } from '../../src/http/scope.js';
import { openPgStore, pgKeysTable } from '../../src/pg/index.js';
import { SWEEP_NOW, tally } from '../support/backlog.js';
import type { RunningChild } from '../support/child.js';
import { idem, idemInShell, jsonLine, startIdem } from '../support/cli.js';
import {
  freshServerDatabase,
  freshServerSchema,
  type ServerSchema,
  serverUrl,
  uniqueName,
} from '../support/pg.js';
import { seedPgBacklog, tallyPg } from '../support/pg-backlog.js';
import { inspectSchema } from '../support/pg-inspect.js';
import { freshDbPath, tempDir } from '../support/temp.js';
import { until } from '../support/waiting.js';

const url = serverUrl() as string;
const dir = tempDir('idem-cli-pg-');
const NOW = ['--now', String(SWEEP_NOW)];
const KEPT = { live: 1_000, pending: 1_000, stalePending: 1_000 };

/** Runs `use` on a fresh empty schema, dropped afterwards. */
async function withSchema(use: (fresh: ServerSchema) => Promise<void>): Promise<void> {
  const fresh = await freshServerSchema(url, 2);
  try {
    await use(fresh);
  } finally {
    await fresh.drop();
  }
}

function on(fresh: ServerSchema): string[] {
  return ['--url', url, '--schema', fresh.schema];
}

function expectOneLineError(stderr: string, text: string): void {
  expect(stderr.trim().split('\n')).toHaveLength(1);
  expect(stderr).toContain(text);
  expect(stderr).not.toMatch(/\n\s+at /);
}

/** Resolves once the sweep has committed its first batch, which deletes `x-0000000`. */
async function firstBatchCommitted(fresh: ServerSchema, running: RunningChild): Promise<void> {
  let exited = false;
  void running.result.then(() => {
    exited = true;
  });
  const probe = `SELECT 1 FROM "${fresh.schema}".keys WHERE id = 'x-0000000'`;
  await until(async () => exited || (await fresh.pool.query(probe)).rowCount !== 1);
}

// Each test runs the CLI as several child processes; run together on a busy machine they take
// longer than the default timeout, which bounds the scenario, not the CLI.
describe.concurrent('idem on PostgreSQL', { timeout: 240_000 }, () => {
  it('migrate creates the table in --schema; the other commands refuse a store without it', async () => {
    await withSchema(async (fresh) => {
      const refused = await Promise.all(
        ['stats', 'expired', 'purge', 'sweep'].map((command) =>
          idem([command, ...on(fresh), ...NOW, '--json']),
        ),
      );
      for (const result of refused) {
        expect(result.code).toBe(1);
        expect(result.stdout).toBe('');
        expectOneLineError(result.stderr, `idem migrate --url URL --schema ${fresh.schema}`);
      }
      const missing = uniqueName('none');
      const noSchema = await idem(['stats', '--url', url, '--schema', missing]);
      expect(noSchema.code).toBe(1);
      expect(await inspectSchema(fresh.db, fresh.schema)).toEqual({
        tables: [],
        indexes: [],
        migrations: null,
      });
      expect(await inspectSchema(fresh.db, missing)).toEqual({
        tables: [],
        indexes: [],
        migrations: null,
      });

      const first = await idem(['migrate', ...on(fresh)]);
      expect(first.code).toBe(0);
      expect(first.stdout).toContain(`(schema "${fresh.schema}"): keys table up to date`);
      expect((await idem(['migrate', ...on(fresh)])).code).toBe(0);
      expect(await inspectSchema(fresh.db, fresh.schema)).toEqual({
        tables: ['__idempotency_migrations', 'keys'],
        indexes: [
          '__idempotency_migrations_pkey',
          'keys_done_id_expires_idx',
          'keys_pkey',
          'keys_status_expires_id_idx',
        ],
        migrations: 5,
      });
      expect(jsonLine(await idem(['stats', ...on(fresh), ...NOW, '--json']))).toEqual({
        pending: 0,
        done: 0,
        expired: 0,
        stalePending: 0,
        lapsed: 0,
        unrecorded: 0,
        now: SWEEP_NOW,
      });
    });
  });

  it('stats, expired and purge print their JSON; purge deletes one batch, never a pending row', async () => {
    await withSchema(async (fresh) => {
      await seedPgBacklog(fresh.db, fresh.schema, {
        expired: 5,
        live: 2,
        pending: 4,
        stalePending: 1,
      });
      const stats = await idem(['stats', ...on(fresh), ...NOW, '--json']);
      expect(jsonLine(stats)).toEqual({
        pending: 5,
        done: 7,
        expired: 5,
        stalePending: 1,
        lapsed: 0,
        unrecorded: 0,
        now: SWEEP_NOW,
      });
      const ids = { ids: ['x-0000000', 'x-0000001', 'x-0000002'] };
      const listed = await idem(['expired', ...on(fresh), ...NOW, '--limit', '3', '--json']);
      expect(jsonLine(listed)).toEqual(ids);
      const purged = await idem(['purge', ...on(fresh), ...NOW, '--limit', '3', '--json']);
      expect(jsonLine(purged)).toEqual(ids);
      expect(await tallyPg(fresh.db, fresh.schema)).toEqual({
        expired: 2,
        live: 2,
        pending: 4,
        stalePending: 1,
      });
    });
  });

  it('sweeps 5,000 expired rows among 8,000, keeping every pending row', async () => {
    await withSchema(async (fresh) => {
      await seedPgBacklog(fresh.db, fresh.schema, { expired: 5_000, ...KEPT });
      const dry = await idem(['sweep', ...on(fresh), ...NOW, '--dry-run', '--json']);
      expect(jsonLine(dry)).toMatchObject({ deleted: 0, remaining: 5_000, wouldDelete: 5_000 });
      const result = await idem(['sweep', ...on(fresh), ...NOW, '--batch', '500', '--json']);
      expect(result.code).toBe(0);
      expect(jsonLine(result)).toMatchObject({
        deleted: 5_000,
        batches: 10,
        remaining: 0,
        backlog: 5_000,
        stoppedBy: 'drained',
      });
      expect(await tallyPg(fresh.db, fresh.schema)).toEqual({ expired: 0, ...KEPT });
    });
  });

  for (const [signal, code] of [
    ['SIGINT', 130],
    ['SIGTERM', 143],
  ] as const) {
    it(`stops a sweep on ${signal} after the current batch, prints the summary, closes the pool and exits ${code}`, async () => {
      await withSchema(async (fresh) => {
        const backlog = 30_000;
        await seedPgBacklog(fresh.db, fresh.schema, { expired: backlog, ...KEPT });
        const running = startIdem(['sweep', ...on(fresh), ...NOW, '--batch', '50']);
        await firstBatchCommitted(fresh, running);
        running.child.kill(signal);
        // The child ends by itself: a pool left open would keep it alive and time the test out.
        const result = await running.result;

        expect({ code: result.code, stderr: result.stderr }).toEqual({ code, stderr: '' });
        const summary = jsonLine(result);
        const after = await tallyPg(fresh.db, fresh.schema);
        expect(summary.stoppedBy).toBe('signal');
        expect(summary.deleted).toBe(backlog - after.expired);
        expect(summary.remaining).toBe(after.expired);
        expect(summary.deleted).toBeGreaterThan(0);
        expect(after.expired).toBeGreaterThan(0);
        expect((summary.deleted as number) % 50).toBe(0);
        expect(after).toMatchObject(KEPT);
      });
    });
  }

  it('uses DATABASE_URL and the public schema when no flag is given; a flag beats the environment', async () => {
    const database = await freshServerDatabase(url);
    try {
      const env = { DATABASE_URL: database.url };
      const migrated = await idem(['migrate'], env);
      expect(migrated.code).toBe(0);
      expect(migrated.stdout).toContain('(schema "public"): keys table up to date');
      expect(jsonLine(await idem(['stats', ...NOW, '--json'], env))).toMatchObject({
        pending: 0,
        done: 0,
      });

      const path = freshDbPath(dir);
      expect((await idem(['migrate', '--db', path], env)).code).toBe(0);
      expect(tally(path)).toEqual({ expired: 0, live: 0, pending: 0, stalePending: 0 });
      // On SQLite this missing file would be refused with exit 1.
      const unused = freshDbPath(dir);
      const viaUrl = await idem(['stats', '--url', database.url, '--json'], { IDEM_DB: unused });
      expect(viaUrl.code).toBe(0);
      expect(existsSync(unused)).toBe(false);
    } finally {
      await database.drop();
    }
  });

  it('refuses --db with --url (exit 2, usage shown) and changes nothing', async () => {
    await withSchema(async (fresh) => {
      await seedPgBacklog(fresh.db, fresh.schema, { expired: 3, pending: 1 });
      const path = freshDbPath(dir);
      const cases: [string[], Record<string, string>][] = [
        [['purge', ...on(fresh), '--db', path, ...NOW], {}],
        [['sweep', '--db', path, ...on(fresh), ...NOW], {}],
        [['sweep', '--schema', fresh.schema, ...NOW], { DATABASE_URL: url, IDEM_DB: path }],
        [['sweep', '--db', path, '--schema', fresh.schema, ...NOW], { DATABASE_URL: url }],
        [['sweep', ...on(fresh), ...NOW, '--batch', '0'], {}],
      ];
      const results = await Promise.all(cases.map(([args, env]) => idem(args, env)));
      results.forEach((result, index) => {
        expect({ case: cases[index], code: result.code }).toEqual({ case: cases[index], code: 2 });
        expect(result.stderr).toContain('Usage: idem');
        expect(result.stdout).toBe('');
      });
      for (const result of results.slice(0, 2)) {
        expect(result.stderr).toMatch(/option '--(db|url) <\w+>' cannot be used with option/);
      }
      expect(results[2]?.stderr).toContain('--schema applies to a PostgreSQL store only');
      expect(results[3]?.stderr).toContain('--schema applies to a PostgreSQL store only');
      expect(await tallyPg(fresh.db, fresh.schema)).toEqual({
        expired: 3,
        live: 0,
        pending: 1,
        stalePending: 0,
      });
      expect(existsSync(path)).toBe(false);
    });
  });

  it('fails with exit 1 and one line for a database that does not exist', async () => {
    const target = new URL(url);
    target.pathname = `/${uniqueName('nodb')}`;
    const result = await idem(['stats', '--url', target.toString()]);
    expect(result.code).toBe(1);
    expectOneLineError(result.stderr, 'does not exist');
  });
});

describe('the operator commands on PostgreSQL', () => {
  it('read commands refuse a missing table or one lacking columns, creating nothing', async () => {
    await withSchema(async (fresh) => {
      expect((await idem(['migrate', ...on(fresh)])).code).toBe(0);
      // The journal dropped and a column of a later migration gone: the table is as an older
      // version left it.
      await fresh.pool.query(`DROP TABLE "${fresh.schema}".__idempotency_migrations`);
      await fresh.pool.query(`ALTER TABLE "${fresh.schema}".keys DROP COLUMN unrecorded`);
      const before = await inspectSchema(fresh.db, fresh.schema);
      const reads = [['stats'], ['expired'], ['pending'], ['show', 'k'], ['sweep', '--dry-run']];
      for (const flags of [[], ['--table', 'nope']]) {
        const results = await Promise.all(
          reads.map((read) => idem([...read, ...on(fresh), ...flags, '--json'])),
        );
        for (const result of results) {
          expect(result.code).toBe(1);
          expect(result.stdout).toBe('');
          expectOneLineError(
            result.stderr,
            `idem migrate --url URL --schema ${fresh.schema}${flags.length > 0 ? ' --table nope' : ''}`,
          );
          if (flags.length === 0) expect(result.stderr).toContain('columns unrecorded');
        }
      }
      expect(await inspectSchema(fresh.db, fresh.schema)).toEqual(before);
      expect(before.migrations).toBeNull();
    });
  });

  it('pending, show and release with --scope and hostile keys, pasted back through a shell', async () => {
    await withSchema(async (fresh) => {
      const store = await openPgStore(fresh.pool, {
        table: pgKeysTable('keys', { schema: fresh.schema }),
      });
      const lease = { expires: 1000, now: 100, leaseSeconds: 30 };
      const ids = [
        storedId('client-7', 'order-42'),
        storedId('client-7', 'esc\u001b[2J'),
        storedId('client-77', 'order-42'),
        'line\nforged',
      ];
      const tokens = new Map<string, number>();
      for (const id of ids) {
        const claim = await store.acquire(id, 'fp', lease);
        if (claim.status === 'acquired') tokens.set(id, claim.fencingToken);
      }
      await store.close();
      const scoped = await idem(['pending', ...on(fresh), '--now', '110', '--scope', 'client-7']);
      expect(scoped.code).toBe(0);
      expect(scoped.stdout).toBe(
        [
          `--scope client-7 '"esc\\u001b[2J"'  live  token ${tokens.get(storedId('client-7', 'esc\u001b[2J'))}  lease ends in 20s  expires in 14m 50s`,
          `--scope client-7 order-42  live  token ${tokens.get(storedId('client-7', 'order-42'))}  lease ends in 20s  expires in 14m 50s`,
          '',
        ].join('\n'),
      );
      const all = await idem(['pending', ...on(fresh), '--now', '1013.5']);
      expect(all.stdout).toContain(
        `'"line\\u000aforged"'  lapsed  token ${tokens.get('line\nforged')}  lease ended 14m 43s ago  expired 13.5s ago\n`,
      );
      const words = (scoped.stdout.split('\n')[0] ?? '').split('  ')[0] ?? '';
      const location = `--url '${url}' --schema ${fresh.schema}`;
      const shown = await idemInShell(`show ${words} ${location} --now 110 --json`);
      expect(jsonLine(shown)).toMatchObject({
        key: storedId('client-7', 'esc\u001b[2J'),
        status: 'pending',
        leaseUntil: 130,
        fencingToken: tokens.get(storedId('client-7', 'esc\u001b[2J')),
        answer: null,
      });
      const released = await idemInShell(`release ${words} --yes --json ${location}`);
      expect(jsonLine(released)).toEqual({
        key: storedId('client-7', 'esc\u001b[2J'),
        result: 'released',
      });
      const left = await fresh.pool.query(`SELECT id FROM "${fresh.schema}".keys ORDER BY id`);
      expect(left.rows.map((row: { id: string }) => row.id)).toEqual(
        ids.filter((id) => id !== storedId('client-7', 'esc\u001b[2J')).sort(),
      );
    });
  });

  it('never prints the password of the URL, in messages or in --json output', async () => {
    await withSchema(async (fresh) => {
      const withPassword = new URL(url);
      withPassword.password = 's3cret-pw';
      const migrated = await idem([
        'migrate',
        '--url',
        withPassword.toString(),
        '--schema',
        fresh.schema,
        '--json',
      ]);
      expect({ code: migrated.code, stderr: migrated.stderr }).toEqual({ code: 0, stderr: '' });
      expect(jsonLine(migrated).store).toContain(':***@');
      const missing = await idem(['stats', '--url', withPassword.toString(), '--schema', 'nope_x']);
      expect(missing.code).toBe(1);
      expect(missing.stderr).toContain(':***@');
      for (const result of [migrated, missing]) {
        expect(`${result.stdout}${result.stderr}`).not.toContain('s3cret-pw');
      }
    });
  });
});
