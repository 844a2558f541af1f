#!/usr/bin/env node
// The `idem` executable: everything is in runCli, which also runs in-process for callers.
import { runCli } from './run.js';

process.exitCode = await runCli(process.argv.slice(2));
