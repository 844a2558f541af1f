import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
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

/**
 * Builds the package from a copy of this checkout in `work` and packs it with `npm pack`, as a
 * release would. Resolves with the tarball's path.
 */
export async function buildAndPack(work: string): Promise<string> {
  const tree = join(work, 'tree');
  mkdirSync(tree);
  for (const file of BUILD_INPUTS) cpSync(join(repoRoot, file), join(tree, file));
  for (const dir of ['src', 'drizzle', 'docs']) {
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
  return join(work, packed.filename);
}

/**
 * Makes an application folder with the tarball installed the way npm would place it
 * (node_modules/drizzle-idempotency) and every other package linked from the dev tree, so no
 * registry is needed.
 */
export async function scratchApp(dir: string, tarball: string): Promise<string> {
  const modules = join(dir, 'node_modules');
  const installed = join(modules, 'drizzle-idempotency');
  mkdirSync(installed, { recursive: true });
  await run('tar', ['-xzf', tarball, '-C', installed, '--strip-components=1']);
  for (const name of readdirSync(devModules)) {
    if (name === 'drizzle-idempotency' || name.startsWith('.')) continue;
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
