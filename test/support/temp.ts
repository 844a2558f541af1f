import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';

/** A fresh temporary directory, removed when the test file ends. */
export function tempDir(prefix = 'idem-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

let counter = 0;

/** A path for a new database file inside `dir`. */
export function freshDbPath(dir: string): string {
  counter += 1;
  return join(dir, `store-${process.pid}-${counter}.db`);
}
