import { readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { readMigrationFiles } from 'drizzle-orm/migrator';
import { describe, expect, it } from 'vitest';
import * as embedded from '../../src/generated/migrations.js';

const drizzleFolder = fileURLToPath(new URL('../../drizzle', import.meta.url));

// The migrators run the embedded copy, never the folder: it must be what drizzle itself reads
// there (same statements, same hash, so a 0.1.0 journal row is still recognised by its hash).
describe('the embedded migrations', () => {
  const dialects = readdirSync(drizzleFolder, { withFileTypes: true })
    .filter((entry) => entry.isDirectory())
    .map((entry) => entry.name);

  it('cover every dialect folder and nothing else', () => {
    expect(Object.keys(embedded).sort()).toEqual(
      dialects.map((dialect) => `${dialect}Migrations`).sort(),
    );
  });

  it.each(dialects)('of drizzle/%s are the files drizzle reads', (dialect) => {
    const files = readMigrationFiles({ migrationsFolder: `${drizzleFolder}/${dialect}` });
    const copy = (embedded as Record<string, unknown>)[`${dialect}Migrations`];
    expect(copy).toEqual(files.map(({ sql, hash, folderMillis }) => ({ sql, hash, folderMillis })));
  });
});
