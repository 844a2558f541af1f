import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// The layers of src/ as docs/development.md describes them, checked on the import statements
// themselves (type-only and dynamic imports included: each one ties the files together).
const SRC = resolve(dirname(fileURLToPath(import.meta.url)), '../../src');

/** One folder per driver: each imports only the shared layers, never another runtime. */
const RUNTIMES = ['sqlite', 'libsql', 'd1', 'bun-sqlite', 'durable-sqlite', 'pg', 'mysql'];
const SQLITE_RUNTIMES = ['sqlite', 'libsql', 'd1', 'bun-sqlite', 'durable-sqlite'];
/** What a folder of the dialect layer may import besides itself. */
const SHARED = ['core', 'generated'];

const IMPORT = /(?:\bfrom\s*|\bimport\s*\(\s*|^\s*import\s+)'(\.{1,2}\/[^']+)'/gm;

function sourceFiles(folder: string): string[] {
  return readdirSync(folder, { withFileTypes: true }).flatMap((entry) => {
    const path = join(folder, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

/** Every file of src/ (relative, e.g. `pg/store.ts`) with the files of src/ it imports. */
function importGraph(): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of sourceFiles(SRC)) {
    const text = readFileSync(file, 'utf8');
    const targets = [...text.matchAll(IMPORT)].map((match) =>
      relative(SRC, resolve(dirname(file), (match[1] ?? '').replace(/\.js$/, '.ts'))),
    );
    graph.set(relative(SRC, file), targets);
  }
  return graph;
}

const folderOf = (file: string) => (file.includes('/') ? (file.split('/')[0] ?? '') : '.');

/** The strongly connected components of more than one file, or of a file importing itself. */
function circles(graph: Map<string, string[]>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (file: string) => {
    index.set(file, index.size);
    low.set(file, index.get(file) ?? 0);
    stack.push(file);
    onStack.add(file);
    for (const target of graph.get(file) ?? []) {
      if (!graph.has(target)) continue;
      if (!index.has(target)) {
        visit(target);
        low.set(file, Math.min(low.get(file) ?? 0, low.get(target) ?? 0));
      } else if (onStack.has(target)) {
        low.set(file, Math.min(low.get(file) ?? 0, index.get(target) ?? 0));
      }
    }
    if (low.get(file) !== index.get(file)) return;
    const component: string[] = [];
    let member: string | undefined;
    do {
      member = stack.pop();
      if (member === undefined) break;
      onStack.delete(member);
      component.push(member);
    } while (member !== file);
    if (component.length > 1 || (graph.get(file) ?? []).includes(file)) {
      found.push(component.sort());
    }
  };
  for (const file of graph.keys()) if (!index.has(file)) visit(file);
  return found;
}

/** Each import of a file in one of `folders` that leaves the folder for one not in `allowed`. */
function edgesOutside(
  graph: Map<string, string[]>,
  folders: readonly string[],
  allowed: (folder: string) => readonly string[],
): string[] {
  return [...graph].flatMap(([file, targets]) => {
    const folder = folderOf(file);
    if (!folders.includes(folder)) return [];
    const permitted = [folder, ...allowed(folder)];
    return targets
      .filter((target) => !permitted.includes(folderOf(target)))
      .map((target) => `${file} → ${target}`);
  });
}

describe('the layers of src/', () => {
  const graph = importGraph();

  it('reads the imports it checks', () => {
    expect(graph.get('sqlite/store.ts')).toContain('sqlite-dialect/statements.ts');
    expect(graph.get('pg/store.ts')).toContain('pg/compile.ts');
    expect(graph.get('cli/open-store.ts')).toContain('sqlite/open.ts');
  });

  it('has no import circle', () => {
    expect(circles(graph)).toEqual([]);
  });

  it('finds a circle when there is one', () => {
    const circular = new Map([
      ['a.ts', ['b.ts']],
      ['b.ts', ['c.ts']],
      ['c.ts', ['a.ts']],
      ['d.ts', ['a.ts']],
    ]);
    expect(circles(circular)).toEqual([['a.ts', 'b.ts', 'c.ts']]);
  });

  it('keeps core/ free of every dialect and front end', () => {
    expect(edgesOutside(graph, ['core'], () => [])).toEqual([]);
  });

  it('keeps the SQLite dialect free of every runtime', () => {
    expect(edgesOutside(graph, ['sqlite-dialect'], () => SHARED)).toEqual([]);
  });

  it('lets a runtime import only core/ and its dialect, never another runtime', () => {
    const allowed = (folder: string) =>
      SQLITE_RUNTIMES.includes(folder) ? [...SHARED, 'sqlite-dialect'] : SHARED;
    expect(edgesOutside(graph, RUNTIMES, allowed)).toEqual([]);
  });
});
