import { describe, it } from 'vitest';
import { scaled } from '../support/stress.js';
import { freshDbPath, tempDir } from '../support/temp.js';
import { transactionalCommands } from './commands.js';
import { runModel } from './model-run.js';
import { sqliteTarget } from './sqlite-target.js';

const dir = tempDir();

describe('model-based: random sequences agree with the reference model', () => {
  it('on a SQLite file, the transactional path included', {
    timeout: scaled(120_000, 3_600_000),
  }, async () => {
    const target = sqliteTarget(freshDbPath(dir));
    try {
      await runModel(target, scaled(1000, 50_000), transactionalCommands);
    } finally {
      target.close();
    }
  });
});
