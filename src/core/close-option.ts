/** The close options of a store over a connection it can close itself (the SQLite family). */
export interface CloseOptions {
  readonly onClose?: () => unknown;
  readonly closeConnection?: boolean;
}

/**
 * What a store's `close()` calls: `onClose`, or for the deprecated `closeConnection: true` the
 * connection's own `close()`.
 */
export function closeHook(
  connection: { close(): unknown },
  options: CloseOptions,
): (() => unknown) | undefined {
  if (options.onClose !== undefined) return options.onClose;
  return options.closeConnection === true ? () => connection.close() : undefined;
}
