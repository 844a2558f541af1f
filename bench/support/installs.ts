// Copies of the package installed outside the checkout, as a user installs it: the packed
// tarball of the built dist/ with a chosen drizzle-orm and better-sqlite3, under a chosen Node.
// better-sqlite3 is a native module built for one Node ABI, so each Node gets its own copy,
// compiled by npm's install script against that Node's headers (npm_config_nodedir). Kept in
// ~/.cache/idem-bench between runs: only a changed tarball is installed again. The first run
// compiles better-sqlite3 once per copy (minutes each on a small machine).
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startChild } from './child.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CACHE = join(homedir(), '.cache', 'idem-bench');

/** The better-sqlite3 every installed copy uses: the checkout's, so only the named part differs. */
const BETTER_SQLITE3 = (
  JSON.parse(readFileSync(join(ROOT, 'node_modules/better-sqlite3/package.json'), 'utf8')) as {
    version: string;
  }
).version;

/** The checkout's drizzle-orm, the 0.45 side of the drizzle comparison. */
export const CHECKOUT_DRIZZLE = (
  JSON.parse(readFileSync(join(ROOT, 'node_modules/drizzle-orm/package.json'), 'utf8')) as {
    version: string;
  }
).version;

/**
 * The `node` binary of Node `major`, installed by `.ci/install-node` (from the npm registry, with
 * its headers) into ~/.cache/idem-ci once.
 */
export function nodeBinary(major: number): string {
  const bin = execFileSync(join(ROOT, '.ci/install-node'), [String(major)], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  }).trim();
  return join(bin, 'node');
}

/**
 * Packs the checkout's built dist/ (`npm run bench` builds it first) as a release would, into a
 * tarball named by its contents: a new build is a new name, which npm installs in place of the
 * old one while keeping everything else its lockfile holds (better-sqlite3 is not rebuilt).
 */
export function packCheckout(): string {
  if (!existsSync(join(ROOT, 'dist/index.js'))) {
    throw new Error('dist/ is missing: build the package first (npm run bench does)');
  }
  const packs = join(CACHE, 'packs');
  mkdirSync(packs, { recursive: true });
  const name = execFileSync(
    'npm',
    ['pack', '--silent', '--ignore-scripts', '--pack-destination', packs],
    { cwd: ROOT, encoding: 'utf8' },
  )
    .trim()
    .split('\n')
    .at(-1);
  if (name === undefined || name === '') throw new Error('npm pack printed no tarball name');
  const packed = join(packs, name);
  const hash = createHash('sha256').update(readFileSync(packed)).digest('hex').slice(0, 16);
  const named = join(packs, `drizzle-idempotency-${hash}.tgz`);
  renameSync(packed, named);
  return named;
}

/** An installed copy of the package. */
export interface Installed {
  /** The directory whose node_modules holds it. */
  readonly dir: string;
  /** The Node binary it was built for and runs under. */
  readonly node: string;
}

/**
 * Installs `tarball` with drizzle-orm `drizzle` and the checkout's better-sqlite3 into
 * ~/.cache/idem-bench/`name`, with `node` running npm (and so building better-sqlite3 for its
 * ABI); a no-op when the same tarball and versions are installed there already.
 */
export function installCopy(
  name: string,
  node: string,
  tarball: string,
  drizzle: string,
): Installed {
  const dir = join(CACHE, name);
  const specs = [tarball, `drizzle-orm@${drizzle}`, `better-sqlite3@${BETTER_SQLITE3}`];
  const stamp = JSON.stringify({ specs, node });
  const stampFile = join(dir, '.installed');
  if (existsSync(stampFile) && readFileSync(stampFile, 'utf8') === stamp) return { dir, node };
  mkdirSync(dir, { recursive: true });
  rmSync(stampFile, { force: true });
  writeFileSync(
    join(dir, 'package.json'),
    `${JSON.stringify({ name: `idem-bench-${name}`, private: true, type: 'module' })}\n`,
  );
  const bin = dirname(node);
  const npm = (args: string[]) =>
    execFileSync('npm', [...args, '--no-audit', '--no-fund', '--loglevel=error'], {
      cwd: dir,
      stdio: ['ignore', 'inherit', 'inherit'],
      // npm's shebang finds this Node first; node-gyp builds against its headers.
      env: {
        ...process.env,
        PATH: `${bin}:${process.env.PATH ?? ''}`,
        npm_config_nodedir: dirname(bin),
      },
    });
  npm(['install', ...specs]);
  // An install interrupted while compiling leaves a package npm counts as installed; build it
  // again if this Node cannot open a database with it.
  if (!opensDatabase(dir, node)) npm(['rebuild', 'better-sqlite3']);
  if (!opensDatabase(dir, node)) throw new Error(`better-sqlite3 in ${dir} does not load`);
  writeFileSync(stampFile, stamp);
  return { dir, node };
}

function opensDatabase(dir: string, node: string): boolean {
  try {
    execFileSync(node, ['-e', "new (require('better-sqlite3'))(':memory:').close()"], {
      cwd: dir,
      stdio: 'ignore',
    });
    return true;
  } catch {
    return false;
  }
}

/**
 * The newest drizzle-orm 1.x release, or while there is none the newest 1.0 release candidate,
 * as the registry lists them (the same choice as the drizzle-1 CI lane).
 */
export function newestDrizzle1(): string {
  const all = JSON.parse(
    execFileSync('npm', ['view', 'drizzle-orm', 'versions', '--json'], { encoding: 'utf8' }),
  ) as string[];
  const release = all.filter((version) => /^1\.\d+\.\d+$/.test(version));
  const candidates = all
    .filter((version) => /^1\.0\.0-rc\.\d+$/.test(version))
    .sort((a, b) => Number(a.split('.').at(-1)) - Number(b.split('.').at(-1)));
  const pick = release.at(-1) ?? candidates.at(-1);
  if (pick === undefined) throw new Error('the registry lists no drizzle-orm 1.x');
  return pick;
}

/** What one child measures: the `installed-cycles.ts` measurement and the calls it times. */
export interface Measurement {
  readonly name: string;
  readonly count: number;
}

/** Every round's calls per second, by copy, by measurement, by side. */
export type CopyFigures<Copy extends string> = Record<
  Copy,
  Record<string, Record<string, number[]>>
>;

/**
 * Runs every measurement `rounds` times on every copy, each in a fresh child process under the
 * copy's Node, alternating which copy goes first each round so neither always runs on a warmer
 * machine, and returns every round's figures.
 */
export async function alternateCopies<Copy extends string>(
  copies: Record<Copy, Installed>,
  measurements: readonly Measurement[],
  rounds: number,
  dir: string,
): Promise<CopyFigures<Copy>> {
  const names = Object.keys(copies) as Copy[];
  const figures = Object.fromEntries(names.map((name) => [name, {}])) as CopyFigures<Copy>;
  for (let round = 0; round < rounds; round++) {
    for (const measurement of measurements) {
      for (let step = 0; step < names.length; step++) {
        const name = names[(round + step) % names.length] as Copy;
        const copy = copies[name];
        const child = startChild(
          'installed-cycles.ts',
          [copy.dir, measurement.name, dir, String(measurement.count), String(round)],
          copy.node,
        );
        const result = JSON.parse((await child.output).trim()) as Record<string, number>;
        const byMeasurement: Record<string, Record<string, number[]>> = figures[name];
        const bySide = byMeasurement[measurement.name] ?? {};
        byMeasurement[measurement.name] = bySide;
        for (const [side, perSecond] of Object.entries(result)) {
          if (!(perSecond > 0)) {
            throw new Error(`benchmark side did nothing: ${measurement.name} ${side} on ${name}`);
          }
          bySide[side] = [...(bySide[side] ?? []), perSecond];
        }
      }
    }
  }
  return figures;
}

/** The figures of one side of one measurement on one copy; throws if it was never measured. */
export function sideOf<Copy extends string>(
  figures: CopyFigures<Copy>,
  copy: Copy,
  measurement: string,
  side: string,
): number[] {
  const values = figures[copy][measurement]?.[side];
  if (values === undefined) throw new Error(`no figures for ${measurement} ${side} on ${copy}`);
  return values;
}
