import { randomBytes } from 'node:crypto';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { storedId } from '../../src/http/scope.js';
import { openSqliteStore } from '../../src/sqlite/index.js';
import { idem } from '../support/cli.js';
import { freshDbPath, tempDir } from '../support/temp.js';

const dir = tempDir('idem-cli-encryption-');
const k1 = randomBytes(32);
const k2 = randomBytes(32);
const env = (...pairs: [string, Buffer][]) => ({
  IDEM_ENCRYPTION_KEYS: pairs.map(([id, key]) => `${id}:${key.toString('base64')}`).join(','),
});

describe('idem erase, rekey and doctor with IDEM_ENCRYPTION_KEYS', () => {
  it('erases a scope, reports and re-seals retired answers', async () => {
    const path = freshDbPath(dir);
    const store = openSqliteStore(path, { encryption: { keys: { k1 }, current: 'k1' } });
    for (const key of ['a', 'b']) {
      store.reserve(storedId('alice', key), 'd', 1e12);
      store.finish(storedId('alice', key), 'd', { key });
    }
    store.reserve(storedId('alice', 'c'), 'd', 1e12);
    store.reserve(storedId('bob', 'a'), 'd', 1e12);
    store.finish(storedId('bob', 'a'), 'd', { key: 'bob' });
    store.close();

    const unconfirmed = await idem(['erase', '--db', path, '--scope', 'alice'], env(['k1', k1]));
    expect(unconfirmed.code).toBe(2);
    const erased = await idem(
      ['erase', '--db', path, '--scope', 'alice', '--yes', '--batch', '1'],
      env(['k1', k1]),
    );
    expect(erased.stdout).toBe('a\nb\n');
    expect(erased.stderr).toContain('erased 2 answer(s)');
    expect(erased.stderr).toContain('still pending');
    expect(erased.code).toBe(1);

    const rotated = env(['k2', k2], ['k1', k1]);
    const before = await idem(['doctor', '--db', path], rotated);
    expect(before.stdout).toContain('1 under key k1 (retired: run idem rekey)');
    const rekeyed = await idem(['rekey', '--db', path, '--json'], rotated);
    expect(rekeyed.code).toBe(0);
    expect(JSON.parse(rekeyed.stdout)).toEqual({ resealed: 1, current: 0, unreadable: [] });
    const raw = new Database(path, { readonly: true });
    const rows = raw.prepare("SELECT response FROM keys WHERE status = 'done'").all() as {
      response: string;
    }[];
    raw.close();
    expect(rows.map((row) => row.response.slice(0, 14))).toEqual(['$aes256gcm:k2:']);
    const missing = await idem(['doctor', '--db', path], env(['k1', k1]));
    expect(missing.stdout).toContain('1 under key k2 (NOT in the keyring: unreadable)');
  });

  it('refuses a malformed keyring without naming the key bytes', async () => {
    const path = freshDbPath(dir);
    openSqliteStore(path).close();
    const bad = await idem(['rekey', '--db', path], { IDEM_ENCRYPTION_KEYS: 'k1:c2hvcnQ=' });
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain('must be 32 bytes in base64');
    expect(bad.stderr).not.toContain('c2hvcnQ');
  });
});
