import fc from 'fast-check';
import { type ModelState, type ModelTarget, storeCommands } from './commands.js';
import { ReferenceModel } from './model.js';

/**
 * Runs `numRuns` random command sequences (`storeCommands` unless told) against `target` and the
 * reference model. A failure
 * throws fast-check's report: the seed, the path and the shrunk sequence of commands. Set
 * FC_SEED (and FC_PATH) to replay one.
 */
export async function runModel<T extends ModelTarget>(
  target: T,
  numRuns: number,
  commands: fc.Arbitrary<Iterable<fc.AsyncCommand<ModelState, T>>> = storeCommands,
): Promise<void> {
  const seed =
    process.env.FC_SEED === undefined
      ? Date.now() ^ (Math.random() * 2 ** 31)
      : Number(process.env.FC_SEED);
  const path = process.env.FC_PATH;
  await fc.assert(
    fc.asyncProperty(commands, async (sequence) => {
      await target.clear();
      const setup = () => ({
        model: { ref: new ReferenceModel() } satisfies ModelState,
        real: target,
      });
      await fc.asyncModelRun(setup, sequence);
    }),
    { numRuns, seed, ...(path === undefined ? {} : { path }) },
  );
}
