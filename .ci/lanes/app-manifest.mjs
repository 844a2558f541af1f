// Prints the package.json of a lane's scratch application: the packed tarball, this checkout's
// dev dependencies at their pins (what the tests use), and the versions the lane names instead.
// Usage: node app-manifest.mjs <checkout package.json> <tarball> [name@version ...]
import { readFileSync } from 'node:fs';

const [manifestPath, tarball, ...pins] = process.argv.slice(2);
if (manifestPath === undefined || tarball === undefined) {
  throw new Error('usage: app-manifest.mjs <package.json> <tarball> [name@version ...]');
}
const manifest = JSON.parse(readFileSync(manifestPath, 'utf8'));
// Tools of the main suite the lanes do not run: other runtimes, benchmarks, comparisons, linters.
const unused = new Set([
  '@arethetypeswrong/cli',
  '@aws-lambda-powertools/idempotency',
  '@biomejs/biome',
  '@cloudflare/workers-types',
  '@node-idempotency/core',
  '@node-idempotency/storage-adapter-redis',
  '@redis/client',
  '@types/amqplib',
  '@types/compression',
  'amqplib',
  'autocannon',
  'bun',
  'compression',
  'deno',
  'miniflare',
  'publint',
  'tsup',
]);
const dependencies = { 'drizzle-idempotency': `file:${tarball}` };
for (const [name, version] of Object.entries(manifest.devDependencies)) {
  if (!unused.has(name)) dependencies[name] = version;
}
for (const pin of pins) {
  const at = pin.lastIndexOf('@');
  if (at <= 0) throw new Error(`expected name@version, got ${pin}`);
  dependencies[pin.slice(0, at)] = pin.slice(at + 1);
}
const app = {
  name: 'idem-lane-app',
  version: '0.0.0',
  private: true,
  type: 'module',
  dependencies,
};
process.stdout.write(`${JSON.stringify(app, null, 2)}\n`);
