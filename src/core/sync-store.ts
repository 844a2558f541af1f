import type { Keyring } from './encryption.js';
import { type KeyStatementsOf, KeyStore } from './key-store.js';
import type { LeasedIdempotencyStore } from './store.js';

/**
 * One synchronous dialect's statements (better-sqlite3, bun:sqlite, a Durable Object's SQLite):
 * every one answers its value at once. See {@link KeyStatementsOf}.
 */
export type SyncKeyStatements = KeyStatementsOf<'sync'>;

/**
 * A {@link LeasedIdempotencyStore} whose every operation answers at once, over one dialect's
 * {@link SyncKeyStatements}: the synchronous form of {@link KeyStore}, with the same argument
 * checks, closed-store guard and result shaping as the asynchronous stores. A bad argument or a
 * closed store throws.
 *
 * @typeParam T - the type of the stored responses
 */
export class SyncIdempotencyStore<T = unknown>
  extends KeyStore<T, 'sync'>
  implements LeasedIdempotencyStore<T>
{
  /**
   * @param statements - the dialect's statements, see {@link SyncKeyStatements}
   * @param encryption - the keyring answers are sealed with; JSON text when absent
   */
  constructor(statements: SyncKeyStatements, encryption?: Keyring) {
    super(statements, 'sync', encryption);
  }
}
