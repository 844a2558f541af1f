import type { IdempotencyStore } from '../../src/index.js';
import { openSqliteStore } from '../../src/sqlite/index.js';
import { freshDbPath, tempDir } from './temp.js';

/** A fresh, empty store of one dialect, for the HTTP tests. */
export interface StoreFactory {
  readonly name: string;
  open(): Promise<{ store: IdempotencyStore<unknown>; close(): Promise<void> }>;
}

/**
 * Every dialect the HTTP layer is tested on. Call it at the top level of a test file (it makes a
 * temporary directory removed when the file ends). A dialect is one more entry.
 */
export function storeFactories(): StoreFactory[] {
  const dir = tempDir('idem-http-');
  return [
    {
      name: 'SQLite file',
      open: async () => {
        const store = openSqliteStore(freshDbPath(dir));
        return { store, close: async () => store.close() };
      },
    },
  ];
}
