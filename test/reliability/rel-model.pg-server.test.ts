import { describe, it } from 'vitest';
import { serverUrl } from '../support/pg.js';
import { scaled } from '../support/stress.js';
import { transactionalCommands } from './commands.js';
import { runModel } from './model-run.js';
import { pgServerTarget } from './pg-target.js';

// Collected only when DATABASE_URL is set (see vitest.config.ts); then an unreachable server fails.
const url = serverUrl() as string;

describe('model-based: random sequences agree with the reference model', () => {
  it('on the PostgreSQL server, the transactional path included', {
    timeout: scaled(300_000, 3_600_000),
  }, async () => {
    const target = await pgServerTarget(url);
    try {
      await runModel(target, scaled(1000, 10_000), transactionalCommands);
    } finally {
      await target.close();
    }
  });
});
