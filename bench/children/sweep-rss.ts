// Child process: sweeps every expired answer of the store at argv[2] in batches of argv[3] at
// now = argv[4], and prints the rows deleted and the peak resident set size of this process.
import { openSqliteStore } from '../../src/sqlite/index.js';

const [path, batch, now] = process.argv.slice(2);
if (path === undefined || batch === undefined || now === undefined) {
  throw new Error('usage: sweep-rss.ts PATH BATCH NOW');
}
const store = openSqliteStore(path);
const baselineMb = process.memoryUsage().rss / 2 ** 20;
let deleted = 0;
for (let n = store.sweepBatch(Number(now), Number(batch)); n > 0; ) {
  deleted += n;
  n = store.sweepBatch(Number(now), Number(batch));
}
store.close();
// maxRSS is in kilobytes: the high-water mark over the whole life of the process.
const peakMb = process.resourceUsage().maxRSS / 1024;
process.stdout.write(`${JSON.stringify({ deleted, baselineMb, peakMb })}\n`);
