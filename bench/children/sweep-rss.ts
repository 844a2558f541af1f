// Child process: sweeps every expired answer of the store at argv[2] at now = argv[3] with the
// library's sweep in batches of argv[4], and prints the rows deleted and this process's peak
// resident set size.
import { sweep } from '../../src/index.js';
import { openSqliteStore } from '../../src/sqlite/index.js';

const [path, now, batchSize] = process.argv.slice(2);
if (path === undefined || now === undefined || batchSize === undefined) {
  throw new Error('usage: sweep-rss.ts PATH NOW BATCH_SIZE');
}
const store = openSqliteStore(path);
const baselineMb = process.memoryUsage().rss / 2 ** 20;
const { deleted } = await sweep(store, { now: Number(now), batchSize: Number(batchSize) });
store.close();
// maxRSS is in kilobytes: the high-water mark over the whole life of the process.
const peakMb = process.resourceUsage().maxRSS / 1024;
process.stdout.write(`${JSON.stringify({ deleted, baselineMb, peakMb })}\n`);
