// Fails when a schema file drifted from its committed migrations. `drizzle-kit check` does not
// notice that, so each config is generated again: it must report no changes and leave the
// migrations folder untouched. The SQL the migrators run is the copy embedded in
// src/generated/migrations.ts, so that copy must also match drizzle/ as it stands.
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { GENERATED, renderMigrations } from './embed-migrations.mjs';

const configs = readdirSync('.').filter((name) => /^drizzle(\.\w+)?\.config\.ts$/.test(name));
let failed = false;
for (const config of configs) {
  const output = execFileSync('npx', ['drizzle-kit', 'generate', '--config', config], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  if (!output.includes('No schema changes')) {
    console.error(`${config}: the schema differs from the committed migrations:\n${output}`);
    failed = true;
  }
}
const status = execFileSync('git', ['status', '--porcelain', '--', 'drizzle/'], {
  encoding: 'utf8',
});
if (status.trim() !== '') {
  console.error(`drizzle/ changed while checking migrations:\n${status}`);
  failed = true;
}
if (readFileSync(GENERATED, 'utf8') !== renderMigrations()) {
  console.error(`${GENERATED} does not hold the migrations now in drizzle/.`);
  failed = true;
}
if (failed) {
  console.error(
    'Run `npm run db:generate`, review the new migration and commit it with the embedded copy.',
  );
  process.exit(1);
}
console.log(`migrations match the schema (${configs.join(', ')})`);
