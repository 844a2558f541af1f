import { freshServerSchema } from '../support/pg.js';
import { pgStepsHarness } from './steps-dialects.js';
import { stepsSuite } from './steps-suite.js';

// Runs only when DATABASE_URL is set (see vitest.config.ts); then an unreachable server fails it.
const url = process.env.DATABASE_URL as string;

stepsSuite('PostgreSQL (node-postgres, server)', async () => {
  const server = await freshServerSchema(url);
  return pgStepsHarness(server.db, () => server.drop());
});
