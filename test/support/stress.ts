/**
 * `npm run test:stress` sets STRESS=1: the reliability tests then run many more sequences and
 * trials than in `npm test`, which must stay fast.
 */
const stress = process.env.STRESS === '1';

/** `normal` in `npm test`, `heavy` under `npm run test:stress`. */
export function scaled(normal: number, heavy: number): number {
  return stress ? heavy : normal;
}
