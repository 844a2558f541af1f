// Child process: sweeps every expired answer of the store at argv[2] at now = argv[3] with the
// library's sweep in batches of argv[4], and prints the rows deleted, this process's resident set
// size with the store open before sweeping, its peak over its whole life, and the V8 heap before
// and after (what the JavaScript side holds, beside SQLite's own memory).
import { sweep } from '../../src/index.js';
import { openSqliteStore } from '../../src/sqlite/index.js';

const [path, now, batchSize] = process.argv.slice(2);
if (path === undefined || now === undefined || batchSize === undefined) {
  throw new Error('usage: sweep-rss.ts PATH NOW BATCH_SIZE');
}
const mb = (bytes: number) => bytes / 2 ** 20;
const store = openSqliteStore(path);
const before = process.memoryUsage();
const { deleted } = await sweep(store, { now: Number(now), batchSize: Number(batchSize) });
const after = process.memoryUsage();
store.close();
// maxRSS is in kilobytes: the high-water mark over the whole life of the process.
const peakMb = process.resourceUsage().maxRSS / 1024;
process.stdout.write(
  `${JSON.stringify({
    deleted,
    baselineMb: mb(before.rss),
    peakMb,
    heapBeforeMb: mb(before.heapTotal),
    heapAfterMb: mb(after.heapTotal),
  })}\n`,
);
