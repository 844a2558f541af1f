import { describe, expect, it } from 'vitest';
import { InvalidTimeError, releaseStuckKey } from '../../src/index.js';
import { openSqliteStore } from '../../src/sqlite/index.js';
import { freshDbPath, tempDir } from '../support/temp.js';

const dir = tempDir('idem-release-stuck-');

describe('releaseStuckKey', () => {
  it('refuses a live lease, releases lapsed, unrecorded and unleased keys', async () => {
    const store = openSqliteStore(freshDbPath(dir));
    const live = store.acquire('live', 'f', { now: 100, expires: 1000, leaseSeconds: 30 });
    store.acquire('lapsed', 'f', { now: 100, expires: 1000, leaseSeconds: 1 });
    const unrecorded = store.acquire('unrecorded', 'f', {
      now: 100,
      expires: 1000,
      leaseSeconds: 30,
    });
    if (live.status !== 'acquired' || unrecorded.status !== 'acquired')
      throw new Error('not acquired');
    store.markUnrecorded('unrecorded', 'f', unrecorded.fencingToken);
    store.reserve('unleased', 'f', 1000);

    expect(await releaseStuckKey(store, 'live', { now: 110 })).toEqual({
      result: 'live',
      leaseUntil: 130,
      fencingToken: live.fencingToken,
    });
    expect(store.get('live')?.status).toBe('pending');
    for (const key of ['lapsed', 'unrecorded', 'unleased']) {
      expect(await releaseStuckKey(store, key, { now: 110 })).toEqual({ result: 'released' });
      expect(store.get(key)).toBeNull();
    }
    expect(await releaseStuckKey(store, 'live', { now: 110, force: true })).toEqual({
      result: 'released',
    });
    expect(await releaseStuckKey(store, 'gone', { now: 110 })).toEqual({ result: 'missing' });
    await expect(releaseStuckKey(store, 'live', { now: Number.NaN })).rejects.toThrow(
      InvalidTimeError,
    );
    store.close();
  });

  it('keeps a key a retry took over between its read and its release', async () => {
    const store = openSqliteStore(freshDbPath(dir));
    store.acquire('k', 'f', { now: 100, expires: 1000, leaseSeconds: 1 });
    let taken: number | undefined;
    // The real store, with a retry taking the lapsed key over right after the operator's read.
    const racing = {
      get: (key: string) => {
        const record = store.get(key);
        if (taken === undefined) {
          const takeover = store.acquire('k', 'f', { now: 110, expires: 1000, leaseSeconds: 30 });
          if (takeover.status === 'acquired') taken = takeover.fencingToken;
        }
        return record;
      },
      release: store.release.bind(store),
      releasePending: store.releasePending.bind(store),
    };
    expect(await releaseStuckKey(racing, 'k', { now: 110 })).toEqual({
      result: 'live',
      leaseUntil: 140,
      fencingToken: taken,
    });
    expect(store.get('k')?.fencingToken).toBe(taken);
    store.close();
  });
});
