import { type Command, CommanderError } from 'commander';
import { IdempotencyError, InvalidArgumentError } from '../core/errors.js';
import { type CliIo, type CliOutput, processIo } from './io.js';
import { terminalSafe } from './keys.js';
import { maskSecrets, urlSecrets } from './location.js';
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
  const stderr = redacting(io.stderr, secretsOf(argv, io.env));
  const program = buildProgram({ ...io, stderr }, (code) => {
    exitCode = code;
  });
  // The subcommand being run, whose usage a usage error shows (the root's before one is chosen).
  let running: Command = program;
  program.hook('preSubcommand', (_, subcommand) => {
    running = subcommand;
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
      stderr.write(`idem: ${terminalSafe(message)}\n`);
      running.outputHelp({ error: true });
      return ExitCode.usage;
    }
    // Expected failures (a missing directory, a file that is not a database) get one line; an
    // unexpected one keeps its stack, which is what a bug report needs.
    const detail =
      error instanceof IdempotencyError ? message : ((error as Error).stack ?? message);
    stderr.write(`idem: ${terminalSafe(detail)}\n`);
    return ExitCode.runtime;
  }
}

// The passwords of every connection string the command could have been given, typed or from the
// environment, parseable or not.
function secretsOf(argv: readonly string[], env: CliIo['env']): string[] {
  return [...argv, env.DATABASE_URL ?? ''].flatMap((text) => urlSecrets(text));
}

/**
 * stderr with every password hidden where a connection string in a message holds it: a message
 * that echoes an argument (commander's do, and a driver's may quote its connection string) still
 * never shows one, and the same text elsewhere in it stays readable. Only stderr is filtered:
 * stdout holds results (keys, counts) that must stay exact, and none of them quote a URL
 * unmasked.
 */
function redacting(output: CliOutput, secrets: readonly string[]): CliOutput {
  if (secrets.length === 0) return output;
  return Object.assign(Object.create(output) as CliOutput, {
    write: (chunk: string | Uint8Array, ...rest: unknown[]) =>
      (output.write as (chunk: string, ...more: unknown[]) => boolean)(
        maskSecrets(
          typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8'),
          secrets,
        ),
        ...rest,
      ),
  });
}
