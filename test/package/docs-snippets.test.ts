import { execFile } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { freshMysqlDatabase, mysqlUrl } from '../support/mysql.js';
import { freshServerDatabase, serverUrl } from '../support/pg.js';
import { tempDir } from '../support/temp.js';
import { repoRoot } from './scratch-app.js';

const run = promisify(execFile);

/** One ```ts block of a page: where it starts (the line after the fence) and its code. */
interface Snippet {
  page: string;
  line: number;
  code: string;
}

function pages(): string[] {
  const docs = readdirSync(join(repoRoot, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .sort()
    .map((name) => `docs/${name}`);
  return ['README.md', ...docs];
}

function snippetsOf(page: string): Snippet[] {
  const lines = readFileSync(join(repoRoot, page), 'utf8').split('\n');
  const found: Snippet[] = [];
  let open: { line: number; code: string[] } | undefined;
  lines.forEach((text, index) => {
    if (open === undefined) {
      if (/^```(ts|typescript)\s*$/.test(text)) open = { line: index + 2, code: [] };
    } else if (/^```\s*$/.test(text)) {
      found.push({ page, line: open.line, code: open.code.join('\n') });
      open = undefined;
    } else {
      open.code.push(text);
    }
  });
  return found;
}

// './express' → { 'drizzle-idempotency/express': [<repo>/src/http/express.ts] }, from the same
// exports map the build and the tarball use.
function publicPaths(): Record<string, string[]> {
  const manifest = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as {
    exports: Record<string, unknown>;
  };
  const paths: Record<string, string[]> = {};
  for (const [subpath, target] of Object.entries(manifest.exports)) {
    const text = JSON.stringify(target);
    const built = /"\.\/dist\/([^"]+)\.js"/.exec(text)?.[1];
    if (built === undefined) continue;
    paths[`drizzle-idempotency${subpath.slice(1)}`] = [join(repoRoot, 'src', `${built}.ts`)];
  }
  return paths;
}

function fileNameOf(snippet: Snippet): string {
  return `${snippet.page.replace(/\//g, '__')}__L${snippet.line}.ts`;
}

// tsc names the generated file; point at the page and line the reader sees instead.
function toPageLocation(output: string, snippets: Map<string, Snippet>): string {
  return output.replace(/(\S+__L\d+\.ts)\((\d+),(\d+)\)/g, (whole, file: string, row, column) => {
    const snippet = snippets.get(file.split('/').pop() ?? '');
    if (snippet === undefined) return whole;
    return `${snippet.page}:${snippet.line + Number(row) - 1}:${column}`;
  });
}

describe('documentation snippets', () => {
  it('every ```ts block of README.md and docs/*.md typechecks against the public API', async () => {
    const all = pages().flatMap(snippetsOf);
    expect(all.length).toBeGreaterThan(5);
    const dir = tempDir('idem-docs-');
    symlinkSync(join(repoRoot, 'node_modules'), join(dir, 'node_modules'), 'dir');
    writeFileSync(join(dir, 'package.json'), '{ "type": "module" }\n');
    const byFile = new Map<string, Snippet>();
    for (const snippet of all) {
      const name = fileNameOf(snippet);
      byFile.set(name, snippet);
      // Every snippet is its own module, so its declarations never collide with another's.
      writeFileSync(join(dir, name), `${snippet.code}\nexport {};\n`);
    }
    const base = JSON.parse(readFileSync(join(repoRoot, 'tsconfig.json'), 'utf8')) as {
      compilerOptions: Record<string, unknown>;
    };
    const tsconfig = {
      compilerOptions: { ...base.compilerOptions, noEmit: true, paths: publicPaths() },
      files: [
        join(repoRoot, 'test', 'package', 'docs-prelude.ts'),
        // The type-level tests ride along, so a plain vitest run enforces them too: an
        // `expectTypeOf` assertion does nothing at run time, only the compiler checks it.
        ...readdirSync(join(repoRoot, 'test', 'types'))
          .filter((name) => name.endsWith('.ts'))
          .map((name) => join(repoRoot, 'test', 'types', name)),
        ...[...byFile.keys()].map((name) => join(dir, name)),
      ],
    };
    writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify(tsconfig, null, 2));
    const tsc = join(repoRoot, 'node_modules', 'typescript', 'bin', 'tsc');
    const result = await run(process.execPath, [tsc, '-p', join(dir, 'tsconfig.json')], {
      maxBuffer: 16 * 1024 * 1024,
    }).then(
      () => '',
      (error: { stdout?: string; message: string }) => error.stdout || error.message,
    );
    expect(toPageLocation(result, byFile)).toBe('');
  }, 300_000);
});

// The servers a snippet talks to, by the variables it reads: it runs on a fresh database of its
// own on each, and only where that server is configured (as the server test files do).
function serversOf(snippet: Snippet): { pg: boolean; mysql: boolean } {
  return { pg: snippet.code.includes('DATABASE_URL'), mysql: snippet.code.includes('MYSQL_URL') };
}

// Runs one snippet as its own ES module program in its own folder, with the runtime prelude for
// the names the pages leave to the application, and an empty migrations folder of the
// application's own (`./drizzle`). It must finish by itself: a pool left open fails it.
async function runSnippet(snippet: Snippet, root: string, env: NodeJS.ProcessEnv): Promise<string> {
  const dir = join(root, fileNameOf(snippet).replace(/\.ts$/, ''));
  mkdirSync(join(dir, 'drizzle', 'meta'), { recursive: true });
  symlinkSync(join(repoRoot, 'node_modules'), join(dir, 'node_modules'), 'dir');
  writeFileSync(join(dir, 'package.json'), '{ "type": "module" }\n');
  writeFileSync(
    join(dir, 'drizzle', 'meta', '_journal.json'),
    '{ "version": "7", "dialect": "sqlite", "entries": [] }\n',
  );
  const base = JSON.parse(readFileSync(join(repoRoot, 'tsconfig.json'), 'utf8')) as {
    compilerOptions: Record<string, unknown>;
  };
  writeFileSync(
    join(dir, 'tsconfig.json'),
    JSON.stringify({ compilerOptions: { ...base.compilerOptions, paths: publicPaths() } }),
  );
  writeFileSync(join(dir, 'snippet.ts'), `${snippet.code}\nexport {};\n`);
  const prelude = join(repoRoot, 'test', 'package', 'docs-runtime.ts');
  // A page about Bun shows code for Bun (`bun:sqlite`): it runs there, as its readers run it, and
  // complete (the prelude's SQLite store needs better-sqlite3, which Bun cannot load).
  const [command, args] = snippet.code.includes('drizzle-idempotency/bun-sqlite')
    ? [join(repoRoot, 'node_modules', '.bin', 'bun'), ['snippet.ts']]
    : [process.execPath, ['--import', 'tsx', '--import', prelude, 'snippet.ts']];
  return run(command, args, {
    cwd: dir,
    env: { ...process.env, ...env },
    timeout: 60_000,
    maxBuffer: 16 * 1024 * 1024,
  }).then(
    () => '',
    (error: { stderr?: string; killed?: boolean; message: string }) =>
      `${snippet.page}:${snippet.line}: ${error.killed ? 'did not finish within 60 s (a pool or server left open?)' : (error.stderr || error.message).trim().split('\n').slice(-8).join('\n')}`,
  );
}

describe('documentation snippets, run', () => {
  it('every ```ts block of README.md and docs/*.md runs to its end', async () => {
    const all = pages().flatMap(snippetsOf);
    const root = tempDir('idem-docs-run-');
    const pgServer = serverUrl();
    const mysqlServer = mysqlUrl();
    const skipped: string[] = [];
    const failures: string[] = [];
    const queue = [...all];
    // Two at a time: each is a Node process of its own.
    const worker = async (): Promise<void> => {
      for (let snippet = queue.shift(); snippet; snippet = queue.shift()) {
        const needs = serversOf(snippet);
        if ((needs.pg && !pgServer) || (needs.mysql && !mysqlServer)) {
          skipped.push(`${snippet.page}:${snippet.line}`);
          continue;
        }
        const pg = needs.pg && pgServer ? await freshServerDatabase(pgServer) : undefined;
        const mysql =
          needs.mysql && mysqlServer ? await freshMysqlDatabase(mysqlServer, 1) : undefined;
        try {
          const env = {
            ...(pg ? { DATABASE_URL: pg.url } : {}),
            ...(mysql ? { MYSQL_URL: mysql.url } : {}),
          };
          const failure = await runSnippet(snippet, root, env);
          if (failure) failures.push(failure);
        } finally {
          await pg?.drop();
          await mysql?.drop();
        }
      }
    };
    await Promise.all([worker(), worker()]);
    if (skipped.length > 0) {
      console.warn(
        `snippets that need a server not configured here, typechecked only: ${skipped.join(', ')}`,
      );
    }
    expect(failures).toEqual([]);
    expect(all.length - skipped.length).toBeGreaterThan(30);
  }, 900_000);
});
