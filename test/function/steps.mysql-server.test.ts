import { mysqlStepsHarness } from './steps-dialects.js';
import { stepsSuite } from './steps-suite.js';

// Runs only when MYSQL_URL is set (see vitest.config.ts); then an unreachable server fails it.
const url = process.env.MYSQL_URL as string;

stepsSuite('MariaDB (mysql2, server)', () => mysqlStepsHarness(url));
