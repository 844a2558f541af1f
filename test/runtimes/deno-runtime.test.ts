import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { freshServerSchema, type ServerSchema, serverUrl } from '../support/pg.js';
import { tempDir } from '../support/temp.js';

const run = promisify(execFile);
const root = fileURLToPath(new URL('../..', import.meta.url));
const deno = `${root}node_modules/.bin/deno`;

// deno is a dev dependency, so CI always has it: there a missing binary fails; on a dev machine
// without it the smoke run is skipped, saying why.
const present = existsSync(deno);
if (!present && process.env.CI === undefined) {
  console.warn(`${deno} is missing: the Deno smoke run (test/deno/smoke.ts) does not run.`);
}

const expected = {
  reserve: true,
  finish: true,
  fetch: { receipt: 1 },
  purge: ['r'],
  staleFinish: false,
  currentFinish: true,
  counts: { pending: 0, done: 1 },
};

let server: ServerSchema | undefined;
afterAll(async () => {
  await server?.drop();
});

describe.skipIf(!present && process.env.CI === undefined)('under Deno', () => {
  it('runs the libSQL store and, with DATABASE_URL, the node-postgres store', async () => {
    expect(present, `${deno} is missing: run npm install`).toBe(true);
    const url = serverUrl();
    if (url !== undefined) server = await freshServerSchema(url);
    const args = [
      'run',
      '--allow-all',
      '--unstable-sloppy-imports',
      '--node-modules-dir=manual',
      'test/deno/smoke.ts',
      tempDir('idem-deno-'),
      ...(server === undefined ? [] : [server.url, server.schema]),
    ];
    const { stdout } = await run(deno, args, { cwd: root, env: { ...process.env, NO_COLOR: '1' } });
    const seen = JSON.parse(stdout.trim().split('\n').pop() ?? '{}');
    expect(seen.runtime).toMatch(/^deno 2\./);
    expect(seen.libsql).toEqual(expected);
    if (server !== undefined) expect(seen.pg).toEqual(expected);
  }, 300_000);
});
