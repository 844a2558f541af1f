import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { functionTransactional } from './function-transactional.js';
import { mysqlOps } from './mysql.js';
import { peers } from './peers.js';
import { pgOps } from './pg.js';
import { sqliteOps } from './sqlite-ops.js';
import { sqliteRetention } from './sqlite-retention.js';
import { sqliteSweepImpact } from './sqlite-sweep-impact.js';
import { describeMachine } from './support/machine.js';
import type { BenchSize, GroupResult } from './support/report.js';

/** A metric's target: the value must be at least or at most `value`; absent when only reported. */
interface Target {
  readonly op: '>=' | '<=';
  readonly value: number;
}

const TARGETS: Record<string, Target | undefined> = {
  'sqlite.reserve.ratio': { op: '>=', value: 0.9 },
  'sqlite.finish.ratio': { op: '>=', value: 0.9 },
  'sqlite.fetch.ratio': { op: '>=', value: 0.9 },
  'sqlite.fetch.cachedRatio': undefined,
  'sqlite.purge100.scale': { op: '<=', value: 2 },
  'sqlite.purge100.vsNaive': { op: '>=', value: 50 },
  'sqlite.sweep.linearity': { op: '<=', value: 2.5 },
  'sqlite.sweep.rowsPerSec': undefined,
  'sqlite.sweep.writerP99.vsSingleDelete': { op: '<=', value: 0.1 },
  'sqlite.sweep.peakRssMb': { op: '<=', value: 200 },
  'pg.reserve.ratio': { op: '>=', value: 0.9 },
  'pg.finish.ratio': { op: '>=', value: 0.9 },
  'pg.fetch.ratio': { op: '>=', value: 0.9 },
  'mysql.reserve.ratio': { op: '>=', value: 0.9 },
  'mysql.finish.ratio': { op: '>=', value: 0.9 },
  'mysql.fetch.ratio': { op: '>=', value: 0.9 },
  'peer.cycle1.vsNodeIdempotencyRedis': { op: '>=', value: 5 },
  'peer.cycle32.vsNodeIdempotencyRedis': { op: '>=', value: 1 },
  'peer.cycle32.vsPowertoolsRedis': undefined,
  'sqlite.function.transactional.ratio': undefined,
  'pg.function.transactional.ratio': undefined,
};

const GROUPS: Record<string, (size: BenchSize) => Promise<GroupResult>> = {
  'sqlite-ops': sqliteOps,
  'sqlite-retention': sqliteRetention,
  'sqlite-sweep-impact': sqliteSweepImpact,
  pg: pgOps,
  mysql: mysqlOps,
  peers,
  'function-transactional': functionTransactional,
};

function format(value: number): string {
  if (Math.abs(value) >= 1000) return Math.round(value).toLocaleString('en-US');
  return value.toPrecision(3);
}

function verdict(name: string, value: number): string {
  const target = TARGETS[name];
  if (target === undefined) return 'reported';
  const met = target.op === '>=' ? value >= target.value : value <= target.value;
  return `${met ? 'met' : 'NOT met'} (${target.op} ${target.value})`;
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const quick = args.includes('--quick');
  const only = args
    .find((arg) => arg.startsWith('--only='))
    ?.slice('--only='.length)
    .split(',');
  const machine = { ...describeMachine(), mode: quick ? 'quick' : 'full' };
  const metrics: Record<string, number> = {};
  const details: Record<string, number> = {};
  for (const [name, run] of Object.entries(GROUPS)) {
    if (only && !only.includes(name)) continue;
    const started = performance.now();
    process.stderr.write(`${name}…`);
    const result = await run({ quick });
    Object.assign(metrics, result.metrics);
    Object.assign(details, result.details);
    process.stderr.write(` ${((performance.now() - started) / 1000).toFixed(1)} s\n`);
  }
  const rows = Object.entries(metrics).map(([name, value]) => [
    name,
    format(value),
    verdict(name, value),
  ]);
  const width = Math.max(...rows.map((row) => (row[0] ?? '').length));
  console.log(`\n${'metric'.padEnd(width)}  ${'value'.padStart(10)}  target`);
  for (const [name = '', value = '', target = ''] of rows) {
    console.log(`${name.padEnd(width)}  ${value.padStart(10)}  ${target}`);
  }
  console.log('\nbehind the ratios:');
  for (const [name, value] of Object.entries(details)) console.log(`  ${name}: ${format(value)}`);
  const output = fileURLToPath(new URL('./results.json', import.meta.url));
  writeFileSync(output, `${JSON.stringify({ machine, metrics, details }, null, 2)}\n`);
  console.log(`\nwrote ${output}`);
}

await main();
