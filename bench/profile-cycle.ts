// Where one request cycle of ours spends its CPU time: run with `npx tsx bench/profile-cycle.ts
// [inFlight=1] [cycles=20000]`. Runs the shipped request path of the peers benchmark (and the bare
// SQLite cycle beside it) under the V8 sampling profiler and prints each side's time per cycle and
// the share of samples by source file and by function (self time).
import { Session } from 'node:inspector/promises';
import { bareSqliteCycle, oursCycle } from './peers.js';
import { cyclesPerSecond } from './support/cycles.js';
import { benchDir, freshStoreFile } from './support/sqlite-files.js';

interface ProfileNode {
  readonly id: number;
  readonly callFrame: {
    readonly functionName: string;
    readonly url: string;
  };
  readonly hitCount?: number;
}

const inFlight = Number(process.argv[2] ?? 1);
const cycles = Number(process.argv[3] ?? 20_000);
const { dir, cleanup } = benchDir();

const root = new URL('../', import.meta.url).href;

// A sample's place: a file of the project relative to its root, a Node built-in, or native code.
function place(url: string): string {
  if (url === '') return '(native: SQLite, crypto, GC, …)';
  return url.startsWith(root) ? url.slice(root.length) : url;
}

function top(shares: Map<string, number>, total: number, count: number): string[] {
  return [...shares.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, count)
    .map(([name, hits]) => `  ${((hits / total) * 100).toFixed(1).padStart(5)} %  ${name}`);
}

try {
  const session = new Session();
  session.connect();
  for (const [name, side] of [
    ['ours', oursCycle(freshStoreFile(dir), 'NORMAL')],
    ['bare', bareSqliteCycle(freshStoreFile(dir), 'NORMAL')],
  ] as const) {
    await cyclesPerSecond(side.cycle, 2_000, inFlight);
    await session.post('Profiler.enable');
    await session.post('Profiler.start');
    const perSecond = await cyclesPerSecond(side.cycle, cycles, inFlight);
    const { profile } = await session.post('Profiler.stop');
    await side.close();
    const byFile = new Map<string, number>();
    const byFunction = new Map<string, number>();
    let total = 0;
    for (const node of profile.nodes as ProfileNode[]) {
      const hits = node.hitCount ?? 0;
      if (hits === 0) continue;
      total += hits;
      const file = place(node.callFrame.url);
      const fn = `${node.callFrame.functionName || '(anonymous)'} (${file})`;
      byFile.set(file, (byFile.get(file) ?? 0) + hits);
      byFunction.set(fn, (byFunction.get(fn) ?? 0) + hits);
    }
    console.log(
      `\n${name}: ${Math.round(perSecond)} cycles/s, ${(1e6 / perSecond).toFixed(1)} µs a cycle, ${inFlight} in flight`,
    );
    console.log('by file:');
    console.log(top(byFile, total, 12).join('\n'));
    console.log('by function:');
    console.log(top(byFunction, total, 15).join('\n'));
  }
  session.disconnect();
} finally {
  cleanup();
}
