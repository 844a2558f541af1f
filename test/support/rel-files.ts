import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Every file under `root` with its bytes (directories as a marker), so "unchanged" also covers
 * files that appeared or vanished, such as a `-wal`, `-shm` or journal left behind.
 */
export function snapshotDir(root: string): Map<string, Buffer> {
  const files = new Map<string, Buffer>();
  for (const name of readdirSync(root, { recursive: true }) as string[]) {
    const path = join(root, name);
    files.set(name, statSync(path).isDirectory() ? Buffer.from('<dir>') : readFileSync(path));
  }
  return files;
}
