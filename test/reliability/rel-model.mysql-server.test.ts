import { describe, it } from 'vitest';
import { mysqlUrl } from '../support/mysql.js';
import { scaled } from '../support/stress.js';
import { runModel } from './model-run.js';
import { mysqlServerTarget } from './mysql-target.js';

// Collected only when MYSQL_URL is set (see vitest.config.ts); then an unreachable server fails.
const url = mysqlUrl() as string;

describe('model-based: random sequences agree with the reference model', () => {
  it('on the MySQL server', { timeout: scaled(300_000, 3_600_000) }, async () => {
    const target = await mysqlServerTarget(url);
    try {
      await runModel(target, scaled(300, 10_000));
    } finally {
      await target.close();
    }
  });
});
