import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { d1Ops } from './d1.js';
import { drizzleVersions } from './drizzle-versions.js';
import { featureCosts } from './feature-costs.js';
import { functionTransactional } from './function-transactional.js';
import { httpEndToEnd } from './http.js';
import { mysqlOps } from './mysql.js';
import { nodeVersions } from './node-versions.js';
import { peers } from './peers.js';
import { pgOps } from './pg.js';
import { pgBatch } from './pg-batch.js';
import { pgPeers } from './pg-peers.js';
import { pgReplay } from './pg-replay.js';
import { pgScale } from './pg-scale.js';
import { pgbouncerOps } from './pgbouncer.js';
import { sqliteOps } from './sqlite-ops.js';
import { sqliteReplay } from './sqlite-replay.js';
import { sqliteRetention } from './sqlite-retention.js';
import { sqliteSweepImpact } from './sqlite-sweep-impact.js';
import { sqliteSweeperImpact } from './sqlite-sweeper-impact.js';
import { describeMachine } from './support/machine.js';
import type { BenchSize, GroupResult, Metric } from './support/report.js';

/** A metric's target: the value must be at least or at most `value`; absent when only reported. */
interface Target {
  readonly op: '>=' | '<=';
  readonly value: number;
}

const atLeast = (value: number): Target => ({ op: '>=', value });
const atMost = (value: number): Target => ({ op: '<=', value });

// Metrics not listed here are reported without a target.
const TARGETS: Record<string, Target> = {
  'sqlite.reserve.ratio': atLeast(0.9),
  'sqlite.finish.ratio': atLeast(0.9),
  'sqlite.fetch.ratio': atLeast(0.9),
  'sqlite.finish.ratio4k': atLeast(0.9),
  'sqlite.fetch.ratio4k': atLeast(0.9),
  'sqlite.reserve.tinyRatio': atLeast(0.9),
  'sqlite.finish.tinyRatio': atLeast(0.9),
  'sqlite.fetch.tinyRatio': atLeast(0.9),
  'sqlite.acquire.vsReserve': atLeast(0.9),
  'sqlite.replay.ratio': atLeast(0.85),
  'sqlite.purge100.vsDeleteFloor': atMost(1.2),
  'sqlite.purge100.backlogScale': atMost(2),
  'sqlite.sweep.linearity': atMost(2.5),
  'sqlite.sweep.writerP99.vsIdle': atMost(2),
  'sqlite.sweep.rss.scale': atMost(1.2),
  'sqlite.sweep.rss.mb1M': atMost(50),
  'pg.reserve.ratio': atLeast(0.9),
  'pg.finish.ratio': atLeast(0.9),
  'pg.fetch.ratio': atLeast(0.9),
  'pg.purge100.backlogScale': atMost(2),
  'pg.acquire.vsReserve': atLeast(0.9),
  'pg.replay.rowWrites': atMost(0),
  'pg.scale10M.reserve': atLeast(0.8),
  'pg.scale10M.finish': atLeast(0.8),
  'pg.scale10M.fetch': atLeast(0.8),
  'pg.scale10M.purge100': atMost(2),
  'mysql.reserve.ratio': atLeast(0.9),
  'mysql.finish.ratio': atLeast(0.9),
  'mysql.fetch.ratio': atLeast(0.9),
  'peer.cycle1.vsBare': atLeast(0.85),
  'peer.cycle1.vsNodeIdempotencyRedis': atLeast(1.5),
  'peer.cycle32.vsNodeIdempotencyRedis': atLeast(1),
  'peer.pg.cycle32.vsNodeIdempotencyRedis': atLeast(0.5),
  'peer.pg.aofAlways.cycle32.vsNodeIdempotencyRedis': atLeast(1),
  'peer.cycle32.vsPowertoolsRedis': atLeast(2),
  'http.layerOverhead': atLeast(0.85),
  'http.vsNodeIdempotencyRedis': atLeast(1),
};

const GROUPS: Record<string, (size: BenchSize) => Promise<GroupResult>> = {
  'sqlite-ops': sqliteOps,
  'sqlite-replay': sqliteReplay,
  'sqlite-retention': sqliteRetention,
  'sqlite-sweep-impact': sqliteSweepImpact,
  'sqlite-sweeper-impact': sqliteSweeperImpact,
  pg: pgOps,
  'pg-replay': pgReplay,
  'pg-scale': pgScale,
  mysql: mysqlOps,
  'function-transactional': functionTransactional,
  peers,
  http: httpEndToEnd,
  d1: d1Ops,
  pgbouncer: pgbouncerOps,
  'pg-peers': pgPeers,
  'feature-costs': featureCosts,
  'pg-batch': pgBatch,
  'node-versions': nodeVersions,
  'drizzle-versions': drizzleVersions,
};

function format(value: number): string {
  if (Math.abs(value) >= 1000) return Math.round(value).toLocaleString('en-US');
  return value.toPrecision(3);
}

// A target counts as met only if the whole interval meets it: its lower bound for "at least", its
// upper bound for "at most".
function isMet(target: Target, metric: Metric): boolean {
  return target.op === '>=' ? metric.low >= target.value : metric.high <= target.value;
}

function verdict(name: string, metric: Metric): string {
  const target = TARGETS[name];
  if (target === undefined) return 'reported';
  return `${isMet(target, metric) ? 'met' : 'NOT met'} (${target.op} ${target.value})`;
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const quick = args.includes('--quick');
  const only = args
    .find((arg) => arg.startsWith('--only='))
    ?.slice('--only='.length)
    .split(',');
  const machine = { ...describeMachine(), mode: quick ? 'quick' : 'full' };
  const metrics: Record<string, Metric> = {};
  const details: Record<string, number> = {};
  // A group that fails is reported and the others still run: one run gives every figure it can.
  const failed: Record<string, string> = {};
  for (const [name, run] of Object.entries(GROUPS)) {
    if (only && !only.includes(name)) continue;
    const started = performance.now();
    process.stderr.write(`${name}…`);
    try {
      const result = await run({ quick });
      Object.assign(metrics, result.metrics);
      Object.assign(details, result.details);
      process.stderr.write(` ${((performance.now() - started) / 1000).toFixed(1)} s\n`);
    } catch (error) {
      failed[name] = error instanceof Error ? (error.stack ?? error.message) : String(error);
      process.stderr.write(` FAILED\n${failed[name]}\n`);
    }
  }
  const rows = Object.entries(metrics).map(([name, metric]) => [
    name,
    format(metric.value),
    `${format(metric.low)} – ${format(metric.high)}`,
    verdict(name, metric),
  ]);
  const width = Math.max(...rows.map((row) => (row[0] ?? '').length));
  console.log(
    `\n${'metric'.padEnd(width)}  ${'value'.padStart(10)}  ${'95 % interval'.padStart(21)}  target`,
  );
  for (const [name = '', value = '', range = '', target = ''] of rows) {
    console.log(`${name.padEnd(width)}  ${value.padStart(10)}  ${range.padStart(21)}  ${target}`);
  }
  console.log('\nbehind the ratios:');
  for (const [name, value] of Object.entries(details)) console.log(`  ${name}: ${format(value)}`);
  // `--out=<file>` keeps a partial or quick run from replacing the committed full run's figures.
  const out = args.find((arg) => arg.startsWith('--out='))?.slice('--out='.length);
  const output = out ?? fileURLToPath(new URL('./results.json', import.meta.url));
  const withTargets = Object.fromEntries(
    Object.entries(metrics).map(([name, metric]) => {
      const target = TARGETS[name];
      return [
        name,
        {
          ...metric,
          target: target ? `${target.op} ${target.value}` : null,
          met: target ? isMet(target, metric) : null,
        },
      ];
    }),
  );
  writeFileSync(
    output,
    `${JSON.stringify({ machine, metrics: withTargets, details, failed }, null, 2)}\n`,
  );
  console.log(`\nwrote ${output}`);
  if (Object.keys(failed).length > 0) {
    console.log(`failed groups: ${Object.keys(failed).join(', ')}`);
    process.exitCode = 1;
  }
}

await main();
