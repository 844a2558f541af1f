import { readFileSync } from 'node:fs';
import { defineConfig, type Options } from 'tsup';

interface Manifest {
  exports: Record<string, unknown>;
  bin: Record<string, string>;
}

const manifest = JSON.parse(readFileSync('package.json', 'utf8')) as Manifest;

// './dist/http/express.js' → ['http/express', 'src/http/express.ts']
function entryOf(target: string): [string, string] {
  const name = target.replace(/^\.\/dist\//, '').replace(/\.(c?js|d\.c?ts)$/, '');
  return [name, `src/${name}.ts`];
}

// Every JavaScript file the exports map points at, so a subpath added to package.json is built
// without touching this file.
function targets(value: unknown): string[] {
  if (typeof value === 'string') return /^\.\/dist\/.*\.js$/.test(value) ? [value] : [];
  if (value === null || typeof value !== 'object') return [];
  return Object.values(value).flatMap(targets);
}

const library = Object.fromEntries(Object.values(manifest.exports).flatMap(targets).map(entryOf));
// Not a subpath: the script the SQLite worker store starts its thread on, found beside the built
// store. CommonJS only: both builds start it (see src/sqlite/worker-link.ts).
const workerEntries = { 'sqlite/worker-thread': 'src/sqlite/worker-thread.ts' };
const cli = Object.fromEntries(Object.values(manifest.bin).map(entryOf));

const common: Options = {
  outDir: 'dist',
  platform: 'node',
  target: 'node20',
  splitting: true,
  sourcemap: false,
  treeshake: false,
};

export default defineConfig([
  // The ES module build, and the `idem` executable (ES module only: it awaits at top level).
  {
    ...common,
    entry: { ...library, ...cli },
    format: 'esm',
    dts: { entry: library },
  },
  // The CommonJS build for require(): drizzle-kit loading a schema file, CommonJS apps. The shim
  // turns import.meta.url into this file's URL.
  {
    ...common,
    entry: { ...library, ...workerEntries },
    format: 'cjs',
    dts: { entry: library },
    shims: true,
  },
]);
