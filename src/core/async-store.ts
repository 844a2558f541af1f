import type { Keyring } from './encryption.js';
import { type KeyStatementsOf, KeyStore, type Mode } from './key-store.js';
import type { LeasedIdempotencyStore } from './store.js';

/**
 * One asynchronous dialect's statements (libSQL, D1, PostgreSQL, MySQL): every one answers a
 * promise. See {@link KeyStatementsOf}.
 */
export type KeyStatements = KeyStatementsOf<'async'>;

/**
 * A {@link LeasedIdempotencyStore} whose every operation returns a promise, over one dialect's
 * {@link KeyStatements}: the asynchronous form of {@link KeyStore}. A bad argument or a closed
 * store rejects the returned promise, never throws.
 *
 * @typeParam T - the type of the stored responses
 */
export class AsyncIdempotencyStore<T = unknown>
  extends KeyStore<T, 'async'>
  implements LeasedIdempotencyStore<T>
{
  /**
   * @param statements - the dialect's statements, see {@link KeyStatements}; those of a
   * synchronous driver (answering plain values) serve too, behind this promise API
   * @param encryption - the keyring answers are sealed with; JSON text when absent
   */
  constructor(statements: KeyStatements | KeyStatementsOf<Mode>, encryption?: Keyring) {
    super(statements, 'async', encryption);
  }
}
