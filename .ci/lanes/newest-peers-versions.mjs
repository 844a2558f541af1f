// Resolves the versions the newest-peer lane installs: the newest release the registry publishes
// within each peer range of the checkout's package.json, and prints them as `name@version` lines
// (a table of them goes to stderr).
//
//   node newest-peers-versions.mjs <package.json> <work dir> <pass>
//
// Pass `newest` takes the newest version within each peer range (Express 5, Fastify 5, the newest
// Nest 11 minor); pass `previous` then takes the newest of the majors and minors a range still
// accepts below those (Express 4, Fastify 4, the Nest 11 minor before), to install over the first.
// The chosen versions are kept as `<pass>.versions.json` in the work dir.
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const [manifestPath, workDir, pass] = process.argv.slice(2);
if (
  manifestPath === undefined ||
  workDir === undefined ||
  (pass !== 'newest' && pass !== 'previous')
) {
  console.error('usage: newest-peers-versions.mjs <package.json> <work dir> <newest|previous>');
  process.exit(2);
}
const manifest = JSON.parse(readFileSync(manifestPath, 'utf8'));
const peers = manifest.peerDependencies;

// postgres-js is not a peer (the PostgreSQL stores take any drizzle database), but a driver the
// tests run the store on; its range is its current major.
const NEST_PLATFORMS = ['@nestjs/platform-express', '@nestjs/platform-fastify'];
const ranges = {
  express: peers.express,
  fastify: peers.fastify,
  hono: peers.hono,
  '@nestjs/common': peers['@nestjs/common'],
  '@nestjs/core': peers['@nestjs/core'],
  ...Object.fromEntries(NEST_PLATFORMS.map((name) => [name, peers['@nestjs/core']])),
  'reflect-metadata': peers['reflect-metadata'],
  rxjs: peers.rxjs,
  pg: peers.pg,
  postgres: '>=3 <4',
  mysql2: peers.mysql2,
  '@libsql/client': peers['@libsql/client'],
  '@electric-sql/pglite': peers['@electric-sql/pglite'],
  '@neondatabase/serverless': peers['@neondatabase/serverless'],
  '@planetscale/database': peers['@planetscale/database'],
  '@opentelemetry/api': peers['@opentelemetry/api'],
};
for (const [name, range] of Object.entries(ranges)) {
  if (typeof range !== 'string') {
    console.error(`package.json has no peer range for ${name}`);
    process.exit(1);
  }
}

function newestWithin(name, range) {
  const out = execFileSync('npm', ['view', `${name}@${range}`, 'version', '--json'], {
    encoding: 'utf8',
  });
  // One matching version prints a string, several an array in publishing order.
  const found = out.trim() === '' ? [] : [JSON.parse(out)].flat();
  const newest = found
    .filter((version) => !version.includes('-'))
    .sort((a, b) => {
      const [x, y] = [a, b].map((version) => version.split('.').map(Number));
      return x[0] - y[0] || x[1] - y[1] || x[2] - y[2];
    })
    .at(-1);
  if (newest === undefined) throw new Error(`no release of ${name} within ${range}`);
  return newest;
}

const chosen = {};
if (pass === 'newest') {
  for (const [name, range] of Object.entries(ranges)) chosen[name] = newestWithin(name, range);
} else {
  // Below the newest major (Express, Fastify) or minor (Nest) the ranges accept.
  const newest = JSON.parse(readFileSync(join(workDir, 'newest.versions.json'), 'utf8'));
  const major = (name) => Number(newest[name].split('.')[0]);
  for (const name of ['express', 'fastify']) {
    chosen[name] = newestWithin(name, `${ranges[name]} <${major(name)}`);
  }
  const [nestMajor, nestMinor] = newest['@nestjs/core'].split('.').map(Number);
  if (nestMinor === 0) throw new Error('Nest has one minor in range: no previous minor to test');
  for (const name of ['@nestjs/common', '@nestjs/core', ...NEST_PLATFORMS]) {
    chosen[name] = newestWithin(name, `>=${nestMajor}.${nestMinor - 1} <${nestMajor}.${nestMinor}`);
  }
}

writeFileSync(join(workDir, `${pass}.versions.json`), `${JSON.stringify(chosen, null, 2)}\n`);
console.error(`Peers of the ${pass} pass:`);
for (const [name, version] of Object.entries(chosen)) {
  console.error(`  ${name.padEnd(28)} ${version.padEnd(10)} (within ${ranges[name]})`);
  console.log(`${name}@${version}`);
}
