import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  cpSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** The root of this checkout. */
export const repoRoot = fileURLToPath(new URL('../..', import.meta.url));
const devModules = join(repoRoot, 'node_modules');

/** What a command printed. */
export interface Output {
  stdout: string;
  stderr: string;
}

/** Runs `node` with `args` in `cwd` and resolves with its output; rejects on a non-zero exit. */
export function node(cwd: string, args: string[]): Promise<Output> {
  return run(process.execPath, args, { cwd, maxBuffer: 64 * 1024 * 1024, env: process.env });
}

// The files the build reads. Copied so that the build and the tarball never touch this
// checkout's dist/, which other test files and commands may be reading at the same time.
const BUILD_INPUTS = [
  'package.json',
  'tsup.config.ts',
  'tsconfig.json',
  'README.md',
  'BENCHMARKS.md',
  'LICENSE',
];

const BUILD_TREES = ['src', 'drizzle', 'docs'];

// Builds the package from a copy of this checkout in `work` and packs it with `npm pack`, as a
// release would. Resolves with the tarball's path.
async function buildAndPack(work: string): Promise<string> {
  const tree = join(work, 'tree');
  mkdirSync(tree);
  for (const file of BUILD_INPUTS) cpSync(join(repoRoot, file), join(tree, file));
  for (const dir of BUILD_TREES) {
    cpSync(join(repoRoot, dir), join(tree, dir), { recursive: true });
  }
  symlinkSync(devModules, join(tree, 'node_modules'), 'dir');
  await node(tree, [join(devModules, 'tsup', 'dist', 'cli-default.js')]);
  const { stdout } = await run(
    'npm',
    ['pack', '--json', '--ignore-scripts', '--offline', '--pack-destination', work],
    { cwd: tree, maxBuffer: 16 * 1024 * 1024 },
  );
  const [packed] = JSON.parse(stdout) as { filename: string }[];
  if (packed === undefined) throw new Error(`npm pack printed no tarball: ${stdout}`);
  rmSync(tree, { recursive: true, force: true });
  return join(work, packed.filename);
}

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile())
    .map((entry) => join(entry.parentPath, entry.name));
}

// What the build reads, hashed: the same checkout gets the same tarball, any edit a new one.
function buildInputsKey(): string {
  const hash = createHash('sha256');
  const files = [
    ...BUILD_INPUTS.map((file) => join(repoRoot, file)),
    ...BUILD_TREES.flatMap((dir) => filesUnder(join(repoRoot, dir))),
  ].sort();
  for (const file of files) {
    hash.update(relative(repoRoot, file)).update('\0').update(readFileSync(file)).update('\0');
  }
  return hash.digest('hex').slice(0, 16);
}

// Takes the build lock, a directory (made atomically) holding its owner's pid. A lock whose
// owner is gone (a test run killed mid-build) is removed, and the caller tries again.
function tryLock(lock: string): boolean {
  try {
    mkdirSync(lock);
    writeFileSync(join(lock, 'pid'), String(process.pid));
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  }
  const pid = Number(existsSync(join(lock, 'pid')) ? readFileSync(join(lock, 'pid'), 'utf8') : 0);
  if (pid > 0 && !isAlive(pid)) rmSync(lock, { recursive: true, force: true });
  return false;
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

const DAY_MS = 24 * 60 * 60 * 1000;

// Tarballs of earlier checkouts' states, left by earlier runs: those a day old go.
function pruneOldTarballs(keep: string): void {
  for (const name of readdirSync(tmpdir())) {
    const path = join(tmpdir(), name);
    if (!name.startsWith('idem-packed-') || path === keep || name.endsWith('.lock')) continue;
    if (Date.now() - statSync(path).mtimeMs > DAY_MS)
      rmSync(path, { recursive: true, force: true });
  }
}

/**
 * The package as a release would pack it from this checkout as it is now: built once and shared
 * by every test file that asks, across the test run's worker processes, since the build is the
 * slow part. Keyed by a hash of what the build reads, so an edit gets a build of its own, and
 * guarded by a lock so parallel files wait for the one build instead of each making its own.
 * Each caller installs the tarball in a scratch app of its own ({@link scratchApp}).
 * `IDEM_PACKED_TARBALL`, when set, names a tarball packed already, used as it is.
 */
export async function packedTarball(): Promise<string> {
  // The CI lanes pack the package once and run these tests on other Node lines and peers: they
  // name that tarball here, so the test installs the very package they installed.
  const given = process.env.IDEM_PACKED_TARBALL;
  if (given !== undefined && given !== '') return given;
  const home = join(tmpdir(), `idem-packed-${buildInputsKey()}`);
  const done = join(home, 'tarball');
  const lock = `${home}.lock`;
  for (;;) {
    if (existsSync(done)) return readFileSync(done, 'utf8');
    if (tryLock(lock)) {
      try {
        // Another file may have finished the build between the look above and the lock.
        if (existsSync(done)) continue;
        rmSync(home, { recursive: true, force: true });
        mkdirSync(home);
        const tarball = await buildAndPack(home);
        writeFileSync(`${done}.tmp`, tarball);
        renameSync(`${done}.tmp`, done);
        pruneOldTarballs(home);
      } finally {
        rmSync(lock, { recursive: true, force: true });
      }
    } else {
      await sleep(500);
    }
  }
}

/**
 * Makes an application folder with the tarball installed the way npm would place it
 * (node_modules/drizzle-idempotency) and every other package linked from the dev tree, so no
 * registry is needed. The packages named in `omit` are left out, as an application that never
 * installed them.
 */
export async function scratchApp(
  dir: string,
  tarball: string,
  omit: readonly string[] = [],
): Promise<string> {
  const modules = join(dir, 'node_modules');
  const installed = join(modules, 'drizzle-idempotency');
  mkdirSync(installed, { recursive: true });
  await run('tar', ['-xzf', tarball, '-C', installed, '--strip-components=1']);
  for (const name of readdirSync(devModules)) {
    if (name === 'drizzle-idempotency' || name.startsWith('.') || omit.includes(name)) continue;
    if (name.startsWith('@')) {
      // A scope folder: its packages one by one, so one of them can be left out.
      for (const inner of readdirSync(join(devModules, name))) {
        if (omit.includes(`${name}/${inner}`)) continue;
        mkdirSync(join(modules, name), { recursive: true });
        symlinkSync(join(devModules, name, inner), join(modules, name, inner), 'dir');
      }
      continue;
    }
    symlinkSync(join(devModules, name), join(modules, name), 'dir');
  }
  writeFileSync(
    join(dir, 'package.json'),
    `${JSON.stringify({ name: 'scratch-app', version: '0.0.0', private: true }, null, 2)}\n`,
  );
  return dir;
}

/** Writes `files` (relative path → text) into `dir`, creating folders as needed. */
export function writeFiles(dir: string, files: Record<string, string>): void {
  for (const [path, text] of Object.entries(files)) {
    const target = join(dir, path);
    mkdirSync(join(target, '..'), { recursive: true });
    writeFileSync(target, text);
  }
}

/** The installed package's manifest. */
export function installedManifest(app: string): {
  version: string;
  exports: Record<string, unknown>;
  bin: Record<string, string>;
} {
  return JSON.parse(
    readFileSync(join(app, 'node_modules', 'drizzle-idempotency', 'package.json'), 'utf8'),
  );
}
