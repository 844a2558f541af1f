import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * Finds the committed drizzle-kit migrations of one dialect, `drizzle/<dialect>`, shipped beside
 * the code. It walks up from this module's own file because that file sits at different depths
 * in the source tree (`src/core`), the ES module build and the CommonJS build (`dist`, bundled),
 * and the package root is the first folder above all of them that holds the migrations.
 *
 * @param dialect - the folder name under `drizzle/`
 * @returns the absolute path of the folder
 * @throws Error when no enclosing folder holds the migrations: the package is installed incompletely
 */
export function migrationsFolder(dialect: string): string {
  const start = dirname(fileURLToPath(import.meta.url));
  for (let dir = start; ; dir = dirname(dir)) {
    const candidate = join(dir, 'drizzle', dialect);
    if (existsSync(join(candidate, 'meta', '_journal.json'))) return candidate;
    if (dirname(dir) === dir) {
      throw new Error(
        `drizzle/${dialect} migrations not found above ${start}: reinstall the package`,
      );
    }
  }
}
