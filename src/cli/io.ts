/** A stream the CLI writes text to; `isTTY` decides whether a progress bar is drawn. */
export type CliOutput = NodeJS.WritableStream & { readonly isTTY?: boolean };

/** Where the CLI reads its environment and signals from and writes its output to. */
export interface CliIo {
  /** Results: one JSON line with `--json`, human lines otherwise. */
  readonly stdout: CliOutput;
  /** Errors, usage and the progress bar. */
  readonly stderr: CliOutput;
  /** Environment variables (`DATABASE_URL`, `IDEM_DB`). */
  readonly env: Readonly<Record<string, string | undefined>>;
  /** Where SIGINT and SIGTERM arrive; `process` for the real command. */
  readonly signals: Pick<NodeJS.EventEmitter, 'on' | 'off'>;
}

/** The real process's streams, environment and signals. */
export function processIo(): CliIo {
  return { stdout: process.stdout, stderr: process.stderr, env: process.env, signals: process };
}

/**
 * JSON text in printable ASCII: `JSON.stringify` already escapes C0 controls, and every other
 * character past `~` (DEL, C1 controls, bidirectional overrides, line separators) is written
 * `\uXXXX` too, which any JSON parser reads back as the same string.
 */
export function asciiJson(value: unknown): string {
  return (JSON.stringify(value) ?? 'null').replace(
    /[\u007f-\uffff]/g,
    (unit) => `\\u${unit.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}

/**
 * Writes one line of JSON, the machine-readable output of every `--json` command: exact, and
 * in printable ASCII, so no value in it can act on a terminal it is printed to.
 */
export function writeJson(output: CliOutput, value: unknown): void {
  output.write(`${asciiJson(value)}\n`);
}
