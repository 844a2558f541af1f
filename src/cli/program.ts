import { readFile } from 'node:fs/promises';
import { Command, Option } from 'commander';
import manifest from '../../package.json' with { type: 'json' };
import { DEFAULT_PENDING_LIMIT, MAX_PENDING_LIMIT } from '../core/lease.js';
import { DEFAULT_LIMIT } from '../core/validation.js';
import { storedId } from '../http/scope.js';
import { DEFAULT_BATCH_MILLIS } from '../sweep.js';
import {
  eraseCommand,
  expiredCommand,
  migrateCommand,
  pendingCommand,
  purgeCommand,
  rekeyCommand,
  releaseCommand,
  resolveCommand,
  showCommand,
  statsCommand,
} from './commands.js';
import { registerDoctorCommand } from './doctor.js';
import type { CliIo } from './io.js';
import { parseKeyWord, parseScopeWord, terminalSafe } from './keys.js';
import { DEFAULT_DB, type LocationFlags, resolveStoreLocation } from './location.js';
import {
  assertSaneNow,
  parseBatch,
  parseBatchMillis,
  parseDbPath,
  parseDuration,
  parseFingerprint,
  parseLimit,
  parseMaxBatches,
  parseMaxSeconds,
  parseNow,
  parsePendingLimit,
  parseSchema,
  parseTable,
} from './parse.js';
import { sweepCommand, sweepEveryCommand } from './sweep-command.js';

// `--db`, `--url`, `--schema` and `--table` on a command. Their defaults come from the environment
// when the command runs (see resolveStoreLocation), not from commander, so that commander's
// conflict check sees only what was typed.
function addLocationOptions(command: Command): Command {
  return command
    .addOption(
      new Option(
        '--db <path>',
        `a SQLite database file (env IDEM_DB, default ${DEFAULT_DB})`,
      ).argParser(parseDbPath),
    )
    .addOption(
      new Option(
        '--url <url>',
        'a PostgreSQL or MySQL connection string, postgres://… or mysql://… (env DATABASE_URL)',
      ).conflicts('db'),
    )
    .addOption(
      new Option(
        '--schema <name>',
        'the PostgreSQL schema of the keys table (default public)',
      ).argParser(parseSchema),
    )
    .addOption(
      new Option('--table <name>', 'the name of the keys table (default keys)').argParser(
        parseTable,
      ),
    )
    .addOption(
      new Option(
        '--no-prepare',
        'PostgreSQL: send unnamed statements, as a transaction pooler (PgBouncer, Supabase, Neon) needs',
      ),
    );
}

/**
 * Builds the `idem` program. Commands only parse their flags and call library functions; the
 * exit code of a command that has one (a sweep stopped by a signal) is passed to `setExitCode`.
 *
 * @param io - streams, environment and signals
 * @param setExitCode - receives a command's exit code
 */
export function buildProgram(io: CliIo, setExitCode: (code: number) => void): Command {
  const nowOption = () =>
    new Option(
      '--now <seconds>',
      "the time to judge expiry at, on the application's clock (default: now, epoch seconds)",
    ).argParser(parseNow);
  // Read when a command runs, not when the program is built, so a long-lived caller gets a fresh
  // time. The store itself never reads a clock: this is the operator's notion of now.
  const timeOf = (options: { now?: number }) => options.now ?? Date.now() / 1000;
  const locate = (options: LocationFlags) => resolveStoreLocation(options, io.env);
  const jsonOption = () => new Option('--json', 'print one line of JSON');
  const scopeOption = () =>
    new Option(
      '--scope <scope>',
      "the key's scope, as the HTTP layer's scope option gave it (a JSON string literal is decoded)",
    ).argParser(parseScopeWord);
  // The row a <key> argument (with --scope) names: its id in the store, scope included.
  const idOf = (key: string, options: { scope?: string }) => storedId(options.scope, key);
  const limitOption = () =>
    new Option('--limit <n>', 'at most this many ids, 1-100')
      .argParser(parseLimit)
      .default(DEFAULT_LIMIT);

  const program = new Command('idem')
    .description('Retention and inspection of a drizzle-idempotency key store.')
    .version(manifest.version, '-V, --version', 'print the version of drizzle-idempotency')
    .exitOverride()
    .showHelpAfterError()
    .configureOutput({
      writeOut: (text) => io.stdout.write(text),
      // Commander's messages quote the arguments they refuse, which may hold escape sequences.
      writeErr: (text) => io.stderr.write(terminalSafe(text)),
    })
    .option(
      '--force',
      'accept a --now that looks like milliseconds or lies over a year ahead; with release, release a key whose lease is live',
    )
    .hook('preAction', (root, command) => {
      const { now } = command.opts<{ now?: number }>();
      assertSaneNow(now, root.opts<{ force?: boolean }>().force === true, Date.now() / 1000);
    });

  addLocationOptions(
    program
      .command('migrate')
      .description(
        'create the database file or schema, the keys table and its index, or bring them up to date',
      ),
  )
    .addOption(jsonOption())
    .action(async (options) => migrateCommand(io, { ...options, location: locate(options) }));

  addLocationOptions(
    program
      .command('stats')
      .description('count pending, done, expired (the backlog) and stale pending rows'),
  )
    .addOption(nowOption())
    .addOption(jsonOption())
    .addOption(
      new Option('--prometheus', 'print the gauges in the Prometheus text format').conflicts(
        'json',
      ),
    )
    .action(async (options) =>
      statsCommand(io, { ...options, location: locate(options), now: timeOf(options) }),
    );

  addLocationOptions(
    program.command('expired').description('list the ids of expired done rows, ascending'),
  )
    .addOption(nowOption())
    .addOption(limitOption())
    .addOption(jsonOption())
    .action(async (options) =>
      expiredCommand(io, { ...options, location: locate(options), now: timeOf(options) }),
    );

  addLocationOptions(
    program
      .command('purge')
      .description('delete one batch of expired done rows, ascending by id, and print their ids'),
  )
    .addOption(nowOption())
    .addOption(limitOption())
    .addOption(jsonOption())
    .action(async (options) =>
      purgeCommand(io, { ...options, location: locate(options), now: timeOf(options) }),
    );

  addLocationOptions(
    program
      .command('sweep')
      .description('delete every expired done row in batches; never a pending row'),
  )
    .addOption(nowOption())
    .addOption(
      new Option(
        '--batch <n>',
        'rows per batch transaction, 1-10000: fixed, or the most per batch with --batch-millis',
      ).argParser(parseBatch),
    )
    .addOption(
      new Option(
        '--batch-millis <ms>',
        `time budget of each batch; the rows of the next batch follow the time the last took (default on SQLite ${DEFAULT_BATCH_MILLIS} ms without --batch; elsewhere batches of 100)`,
      ).argParser(parseBatchMillis),
    )
    .addOption(
      new Option('--max-batches <n>', 'stop after this many batches').argParser(parseMaxBatches),
    )
    .addOption(
      new Option('--max-seconds <s>', 'start no new batch after this many seconds').argParser(
        parseMaxSeconds,
      ),
    )
    .addOption(
      new Option('--dry-run', 'delete nothing; report the backlog and what a sweep would delete'),
    )
    .addOption(
      new Option(
        '--every <duration>',
        'keep running and sweep every duration (30s, 5m, 1h; jittered), one process at a time among all sweeping this store, until SIGINT or SIGTERM',
      )
        .argParser(parseDuration)
        .conflicts(['now', 'maxBatches', 'maxSeconds', 'dryRun']),
    )
    .addOption(jsonOption())
    .action(async (options) =>
      setExitCode(
        options.every === undefined
          ? await sweepCommand(io, { ...options, location: locate(options), now: timeOf(options) })
          : await sweepEveryCommand(io, {
              ...options,
              every: options.every,
              location: locate(options),
            }),
      ),
    );

  addLocationOptions(
    program
      .command('pending')
      .description(
        'list pending rows, ascending by key, with their lease state (live, lapsed, unrecorded, unleased) and fencing token',
      ),
  )
    .addOption(nowOption())
    .addOption(
      new Option('--stale', 'only rows to look at: lapsed, unrecorded, or unleased past expires'),
    )
    .addOption(
      new Option('--limit <n>', `at most this many rows, 1-${MAX_PENDING_LIMIT}`)
        .argParser(parsePendingLimit)
        .default(DEFAULT_PENDING_LIMIT),
    )
    .addOption(scopeOption())
    .addOption(new Option('--json', 'print one line of JSON: an array of objects'))
    .action(async (options) =>
      pendingCommand(io, { ...options, location: locate(options), now: timeOf(options) }),
    );

  addLocationOptions(
    program
      .command('show')
      .description(
        'print the whole record of <key>: status, lease, fencing token, fingerprint, retention and the stored answer',
      )
      .argument('<key>', 'the idempotency key, as idem pending prints it', parseKeyWord),
  )
    .addOption(scopeOption())
    .addOption(nowOption())
    .addOption(new Option('--body', "print the stored answer's body too"))
    .addOption(jsonOption())
    .action(async (key: string, options) =>
      setExitCode(
        await showCommand(io, {
          ...options,
          id: idOf(key, options),
          location: locate(options),
          now: timeOf(options),
        }),
      ),
    );

  addLocationOptions(
    program
      .command('release')
      .description(
        'delete the pending row of <key> nobody works on (lapsed, unrecorded or unleased), so its next retry runs again; refuses a live lease (unless --force), a done row or a missing key',
      )
      .argument('<key>', 'the idempotency key, as idem pending prints it', parseKeyWord),
  )
    .addOption(scopeOption())
    .addOption(new Option('--yes', 'confirm: without it nothing is deleted'))
    .addOption(
      new Option('--fingerprint <f>', 'only if the row has this fingerprint').argParser(
        parseFingerprint,
      ),
    )
    .addOption(nowOption())
    .addOption(jsonOption())
    .action(async (key: string, options) =>
      setExitCode(
        await releaseCommand(io, {
          ...options,
          // The program's own --force, wherever it is typed: commander gives it to the program.
          force: program.opts<{ force?: boolean }>().force === true,
          id: idOf(key, options),
          location: locate(options),
          now: timeOf(options),
        }),
      ),
    );

  addLocationOptions(
    program
      .command('resolve')
      .description(
        'settle a key held as unrecorded (its outcome was declared unknown, or its answer not recorded) with the answer in --answer FILE: retries then replay it',
      )
      .argument('<key>', 'the idempotency key, as idem pending prints it', parseKeyWord),
  )
    .addOption(scopeOption())
    .addOption(
      new Option(
        '--answer <file>',
        'a JSON file holding the answer in the form the key stores (an HTTP answer as idem show --json prints its response)',
      ).makeOptionMandatory(),
    )
    .addOption(jsonOption())
    .action(async (key: string, options) =>
      setExitCode(
        await resolveCommand(io, {
          ...options,
          id: idOf(key, options),
          location: locate(options),
          answerFile: options.answer,
          answerText: await readFile(options.answer, 'utf8'),
        }),
      ),
    );

  addLocationOptions(
    program
      .command('erase')
      .description(
        'delete every stored answer of one scope in batches (erasure on request) and print the erased keys; pending keys of the scope are listed and left',
      ),
  )
    .addOption(
      new Option('--scope <scope>', 'the scope, as the application gives it')
        .argParser(parseScopeWord)
        .makeOptionMandatory(),
    )
    .addOption(new Option('--yes', 'confirm: without it nothing is deleted'))
    .addOption(
      new Option('--batch <n>', 'rows per batch, 1-10000 (default 500)').argParser(parseBatch),
    )
    .addOption(jsonOption())
    .action(async (options) =>
      setExitCode(await eraseCommand(io, { ...options, location: locate(options) })),
    );

  addLocationOptions(
    program
      .command('rekey')
      .description(
        'reseal in batches every answer not under the current key of IDEM_ENCRYPTION_KEYS (a retired key, or plain JSON)',
      ),
  )
    .addOption(
      new Option('--batch <n>', 'rows per batch, 1-10000 (default 500)').argParser(parseBatch),
    )
    .addOption(jsonOption())
    .action(async (options) =>
      setExitCode(await rekeyCommand(io, { ...options, location: locate(options) })),
    );

  registerDoctorCommand(program, { io, setExitCode, withLocation: addLocationOptions, locate });

  return program;
}
