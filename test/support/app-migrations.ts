import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** drizzle-kit's `when` of the library's first migration: app migrations are older or newer. */
export const OLDER_THAN_OURS = 1_600_000_000_000;
export const NEWER_THAN_OURS = 1_900_000_000_000;

/**
 * Writes a migrations folder as drizzle-kit lays it out (`meta/_journal.json` and one SQL file),
 * holding one application migration dated `when` that runs `statement`: what an application's own
 * `migrate()` applies next to the library's.
 */
export function appMigrationsFolder(
  dir: string,
  dialect: 'sqlite' | 'postgresql',
  when: number,
  statement: string,
): string {
  const folder = join(dir, `app-${dialect}-${when}-${Math.random().toString(36).slice(2, 8)}`);
  mkdirSync(join(folder, 'meta'), { recursive: true });
  writeFileSync(
    join(folder, 'meta', '_journal.json'),
    JSON.stringify({
      version: '7',
      dialect,
      entries: [{ idx: 0, version: '7', when, tag: '0000_orders', breakpoints: true }],
    }),
  );
  writeFileSync(join(folder, '0000_orders.sql'), statement);
  return folder;
}
