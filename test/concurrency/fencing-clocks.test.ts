import { openSqliteStore } from '../../src/sqlite/index.js';
import { describeFencingClocks } from '../support/fencing-clocks-suite.js';
import { freshDbPath, tempDir } from '../support/temp.js';

const dir = tempDir('idem-fencing-');

describeFencingClocks('SQLite file', async () => {
  const path = freshDbPath(dir);
  const store = openSqliteStore(path);
  return { target: path, store, close: async () => store.close() };
});
