import { CommanderError } from 'commander';
import { IdempotencyError, InvalidArgumentError } from '../core/errors.js';
import { type CliIo, processIo } from './io.js';
import { buildProgram } from './program.js';

/** Exit codes of `idem`. */
export const ExitCode = {
  ok: 0,
  /** A runtime error: the database could not be opened, a query failed. */
  runtime: 1,
  /** A usage error: unknown command or flag, a value out of range. The usage is shown. */
  usage: 2,
} as const;

/**
 * Runs the `idem` command line and resolves with its exit code; it never exits the process.
 *
 * @param argv - the arguments after the program name, e.g. `['stats', '--json']`
 * @param io - streams, environment and signals; the real process's by default
 * @example
 * ```ts
 * process.exitCode = await runCli(['sweep', '--db', './idempotency.db', '--json']);
 * ```
 */
export async function runCli(argv: readonly string[], io: CliIo = processIo()): Promise<number> {
  let exitCode: number = ExitCode.ok;
  const program = buildProgram(io, (code) => {
    exitCode = code;
  });
  try {
    await program.parseAsync([...argv], { from: 'user' });
    return exitCode;
  } catch (error) {
    if (error instanceof CommanderError) {
      // Commander has already printed the error and the usage; `--help` ends here with 0.
      return error.exitCode === 0 ? ExitCode.ok : ExitCode.usage;
    }
    const message = error instanceof Error ? error.message : String(error);
    if (error instanceof InvalidArgumentError) {
      io.stderr.write(`idem: ${message}\n`);
      program.outputHelp({ error: true });
      return ExitCode.usage;
    }
    // Expected failures (a missing directory, a file that is not a database) get one line; an
    // unexpected one keeps its stack, which is what a bug report needs.
    const detail =
      error instanceof IdempotencyError ? message : ((error as Error).stack ?? message);
    io.stderr.write(`idem: ${detail}\n`);
    return ExitCode.runtime;
  }
}
