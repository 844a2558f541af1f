import { execFile } from 'node:child_process';
import { cpSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { tempDir } from '../support/temp.js';
import { packedTarball, repoRoot, scratchApp } from './scratch-app.js';

const run = promisify(execFile);

/** One `error TS…` line of the compiler, and whether it is in a file this package answers for. */
interface CompilerError {
  line: string;
  ours: boolean;
}

// The consumer itself and the package's own declarations are judged; other packages' declarations
// (PGlite's without Emscripten's types, drizzle's D1 driver without Cloudflare's) are not ours.
function compilerErrors(output: string): CompilerError[] {
  return output
    .split('\n')
    .filter((line) => /error TS\d+/.test(line))
    .map((line) => ({
      line,
      ours: line.startsWith('consumer.mts') || line.includes('node_modules/drizzle-idempotency/'),
    }));
}

async function typecheck(app: string): Promise<string> {
  const tsc = join(app, 'node_modules', 'typescript', 'bin', 'tsc');
  try {
    const { stdout, stderr } = await run(process.execPath, [tsc, '-p', '.'], {
      cwd: app,
      maxBuffer: 64 * 1024 * 1024,
    });
    return `${stdout}${stderr}`;
  } catch (error) {
    const { stdout, stderr } = error as { stdout?: string; stderr?: string };
    return `${stdout ?? ''}${stderr ?? ''}`;
  }
}

describe('the packed package in a strict application', () => {
  it('typechecks a consumer of every store and adapter with skipLibCheck: false', async () => {
    const app = await scratchApp(join(tempDir('idem-consumer-'), 'app'), await packedTarball());
    cpSync(join(repoRoot, 'test', 'package', 'consumer'), app, { recursive: true });
    const output = await typecheck(app);
    const errors = compilerErrors(output);
    const ours = errors.filter((error) => error.ours).map((error) => error.line);
    expect(ours, `${errors.length} errors in all`).toEqual([]);
    // The compiler ran over the consumer: it holds one deliberate misuse, marked as expected, so
    // a run that read nothing (or types that decayed to any) would report the marker unused.
    expect(output).not.toMatch(/TS2578|TS5083|TS6053|TS18003/);
  }, 600_000);
});
