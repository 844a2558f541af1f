import { sharedPglite } from '../support/pg.js';
import { describePgSweep } from '../support/pg-sweep-suite.js';

describePgSweep('PGlite', sharedPglite());
