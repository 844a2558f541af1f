// The queue example: `npm run example:queue`. Needs RabbitMQ (AMQP_URL, default
// amqp://guest:guest@127.0.0.1:5672). Publishes duplicates, kills a consumer with SIGKILL
// mid-message, and shows that every credit was applied exactly once.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runQueueDemo } from './demo.js';

const dir = mkdtempSync(join(tmpdir(), 'idem-queue-'));
try {
  const result = await runQueueDemo({
    url: process.env.AMQP_URL || 'amqp://guest:guest@127.0.0.1:5672',
    queue: `credits_demo_${process.pid}`,
    dbPath: join(dir, 'queue.db'),
    log: (line) => console.log(line),
  });
  const counts = Object.values(result.creditsPerMessage);
  const once = counts.filter((n) => n === 1).length;
  console.log(
    `${result.published} deliveries published, ${counts.length} messages credited, ` +
      `${once} exactly once, ${counts.length - once} more than once`,
  );
  process.exitCode = once === counts.length ? 0 : 1;
} finally {
  rmSync(dir, { recursive: true, force: true });
}
