import { sharedPglite } from '../support/pg.js';
import { pgStepsHarness } from './steps-dialects.js';
import { stepsSuite } from './steps-suite.js';

const pglite = sharedPglite();

stepsSuite('PostgreSQL (PGlite)', async () => pgStepsHarness(await pglite()));
