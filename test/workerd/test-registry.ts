// What the contracts import from 'vitest' once bundled into a Worker: workerd cannot run vitest, so
// describe/it/beforeEach/afterEach only record the tests here, `expect` is vitest's own (its
// matchers as a chai plugin, as vitest itself builds it), and the Worker runs the recorded tests
// when the test in Node asks, answering what passed and what failed.
import {
  chai,
  type ExpectStatic,
  JestAsymmetricMatchers,
  JestChaiExpect,
  JestExtend,
  setState,
} from '@vitest/expect';

type Hook = () => unknown;

interface Suite {
  readonly name: string;
  readonly parent: Suite | undefined;
  readonly beforeEach: Hook[];
  readonly afterEach: Hook[];
}

interface RecordedTest {
  readonly path: readonly string[];
  readonly suite: Suite;
  readonly body: Hook;
}

chai.use(JestExtend);
chai.use(JestChaiExpect);
chai.use(JestAsymmetricMatchers);

/** vitest's `expect`. */
export const expect = chai.expect as unknown as ExpectStatic;
setState({ assertionCalls: 0, isExpectingAssertions: false, customTesters: [] }, expect);

const root: Suite = { name: '', parent: undefined, beforeEach: [], afterEach: [] };
let current = root;
const recorded: RecordedTest[] = [];

function pathOf(suite: Suite): string[] {
  return suite.parent === undefined ? [] : [...pathOf(suite.parent), suite.name];
}

/** Records the tests `body` declares as a suite named `name`. */
export function describe(name: string, body: () => void): void {
  const suite: Suite = { name, parent: current, beforeEach: [], afterEach: [] };
  const outer = current;
  current = suite;
  try {
    body();
  } finally {
    current = outer;
  }
}

/** Runs `hook` before each test of the current suite and its inner suites. */
export function beforeEach(hook: Hook): void {
  current.beforeEach.push(hook);
}

/** Runs `hook` after each test of the current suite and its inner suites, even a failed one. */
export function afterEach(hook: Hook): void {
  current.afterEach.push(hook);
}

// vitest's `%s`-style placeholders, filled in order with a case's values.
function title(template: string, values: readonly unknown[]): string {
  let next = 0;
  return template.replace(/%[sdij]/g, () => {
    const value = values[next++];
    return typeof value === 'symbol' ? value.toString() : String(value);
  });
}

function test(name: string, body: (...values: never[]) => unknown): void {
  recorded.push({ path: [...pathOf(current), name], suite: current, body: body as Hook });
}

/**
 * Records a test; `it.each(cases)` one per case, each case spread into arguments when every case
 * is an array, as vitest does.
 */
export const it = Object.assign(test, {
  each:
    (cases: readonly unknown[]) =>
    (name: string, body: (...values: never[]) => unknown): void => {
      const spread = cases.every((value) => Array.isArray(value));
      for (const value of cases) {
        const values = spread ? (value as unknown[]) : [value];
        test(title(name, values), () => (body as (...args: unknown[]) => unknown)(...values));
      }
    },
});

function chain(suite: Suite): Suite[] {
  return suite.parent === undefined ? [suite] : [...chain(suite.parent), suite];
}

function describeError(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}

/** What a run of the recorded tests gave: the passed tests' names, and each failure with why. */
export interface RunReport {
  readonly passed: string[];
  readonly failed: { readonly name: string; readonly error: string }[];
}

/**
 * Runs, one after another, every recorded test under the top-level suite `suite`: the suites'
 * beforeEach hooks outermost first, the test, then their afterEach hooks innermost first.
 */
export async function runSuite(suite: string): Promise<RunReport> {
  const report: RunReport = { passed: [], failed: [] };
  for (const test of recorded.filter((each) => each.path[0] === suite)) {
    const suites = chain(test.suite);
    const name = test.path.join(' > ');
    let failure: unknown;
    try {
      for (const each of suites) for (const hook of each.beforeEach) await hook();
      await test.body();
    } catch (error) {
      failure = error;
    }
    for (const each of suites.reverse()) {
      for (const hook of each.afterEach) {
        try {
          await hook();
        } catch (error) {
          failure ??= error;
        }
      }
    }
    if (failure === undefined) report.passed.push(name);
    else report.failed.push({ name, error: describeError(failure) });
  }
  return report;
}
