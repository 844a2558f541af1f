import { afterAll, describe, it } from 'vitest';
import { openSqliteStore } from '../../src/sqlite/index.js';
import { expectOneSweeperAtATime } from '../support/sweeper-processes.js';
import { freshDbPath, tempDir } from '../support/temp.js';

const dir = tempDir('idem-sweeper-');

describe('startSweeper in several processes on one SQLite file', () => {
  const path = freshDbPath(dir);
  const store = openSqliteStore(path);
  afterAll(() => store.close());

  it('sweeps every expired row with at most one process sweeping at a time', async () => {
    await expectOneSweeperAtATime(store, { dialect: 'sqlite', location: path });
  }, 120_000);
});
