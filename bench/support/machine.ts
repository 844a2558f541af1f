import { readFileSync } from 'node:fs';
import { availableParallelism, cpus, loadavg, totalmem } from 'node:os';
import Database from 'better-sqlite3';

// Read from the file: not every package exports its package.json.
function versionOf(name: string): string {
  const path = new URL(`../../node_modules/${name}/package.json`, import.meta.url);
  return (JSON.parse(readFileSync(path, 'utf8')) as { version: string }).version;
}

/** What the figures were measured on. */
export function describeMachine(): Record<string, string | number> {
  const client = new Database(':memory:');
  const sqlite = client.prepare('SELECT sqlite_version()').pluck().get() as string;
  client.close();
  return {
    cpus: availableParallelism(),
    cpuModel: cpus()[0]?.model ?? 'unknown',
    memoryGb: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    node: process.version,
    sqlite,
    betterSqlite3: versionOf('better-sqlite3'),
    drizzleOrm: versionOf('drizzle-orm'),
    // Other work on the machine shifts absolute figures; ratios alternate both sides to cancel it.
    loadAverage1m: Math.round((loadavg()[0] ?? 0) * 100) / 100,
    date: new Date().toISOString(),
  };
}
