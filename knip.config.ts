import type { KnipConfig } from 'knip';

// Every file the package, its tests, benchmarks, examples and CI lanes start from. Knip then
// fails `npm test` on an export, a file or a dependency that nothing reaches from them.
const config: KnipConfig = {
  entry: [
    // The built subpaths of package.json "exports" and the `idem` bin, by their sources: tsup maps
    // each `./dist/<name>.js` to `src/<name>.ts`, which knip does not know.
    'src/index.ts',
    'src/sqlite-file.ts',
    'src/service.ts',
    'src/*/index.ts',
    'src/http/{express,hono,fastify,fetch,nestjs}.ts',
    'src/cli/main.ts',
    // Started by the SQLite worker store as a thread, by path.
    'src/sqlite/worker-thread.ts',
    // Scripts started as child processes or under another runtime, by path.
    'test/fixtures/*.ts',
    // Bundled into a Worker by path, with 'vitest' standing for the registry.
    'test/workerd/contract-worker.ts',
    'test/workerd/test-registry.ts',
    'test/deno/smoke.ts',
    'test/package/docs-{prelude,runtime}.ts',
    'bench/*.ts',
    'bench/children/*.ts',
    'examples/**/main.ts',
    'examples/*/demo.ts',
    'scripts/*.mjs',
    '.ci/lanes/**/*.{mjs,ts}',
  ],
  project: ['**/*.{ts,mjs}'],
  // The drizzle-kit configs the scripts and the example name with `--config`; their schemas are
  // entries too (drizzle-kit reads every table they export).
  drizzle: { config: ['drizzle*.config.ts', 'examples/*/drizzle.config.ts'] },
  // The tests start these binaries by their path in node_modules, not through a script.
  ignoreDependencies: ['bun', 'deno'],
  // System programs the tests and benchmarks start when the machine has them.
  ignoreBinaries: ['redis-server', 'chattr'],
};

export default config;
