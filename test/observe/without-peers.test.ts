import { cpSync, mkdirSync, realpathSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { runTs } from '../support/child.js';
import { freshDbPath, tempDir } from '../support/temp.js';

const root = fileURLToPath(new URL('../..', import.meta.url));

// The packages the store needs at run time; every optional peer is left out.
const REQUIRED = ['drizzle-orm', 'better-sqlite3'];

function packageDir(name: string): string {
  return realpathSync(join(root, 'node_modules', name));
}

/** A copy of the sources and migrations beside a node_modules that holds only `REQUIRED`. */
function isolatedCopy(): string {
  const copy = tempDir('idem-no-peers-');
  for (const folder of ['src', 'drizzle']) {
    cpSync(join(root, folder), join(copy, folder), { recursive: true });
  }
  mkdirSync(join(copy, 'test', 'fixtures'), { recursive: true });
  cpSync(
    join(root, 'test', 'fixtures', 'observe-without-peers.ts'),
    join(copy, 'test', 'fixtures', 'observe-without-peers.ts'),
  );
  cpSync(join(root, 'package.json'), join(copy, 'package.json'));
  mkdirSync(join(copy, 'node_modules'));
  for (const name of REQUIRED) symlinkSync(packageDir(name), join(copy, 'node_modules', name));
  return copy;
}

describe('optional peers', () => {
  it('observe, fetch and fastify import and work where their peers cannot be resolved', async () => {
    const copy = isolatedCopy();
    const result = await runTs(
      join(copy, 'test', 'fixtures', 'observe-without-peers.ts'),
      [freshDbPath(copy)],
      {},
      copy,
    );
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    const output = JSON.parse(result.stdout) as Record<string, unknown>;
    expect(output).toMatchObject({
      otelMissing: true,
      fastifyMissing: true,
      fastifyHooks: ['onError', 'onSend', 'preHandler', 'preParsing'],
      fetchStatus: 201,
      unwrapped: true,
      reserved: true,
      finished: true,
    });
    expect(output.metrics).toContain('idempotency_done_keys 2\n');
  });
});
