import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { tempDir } from '../support/temp.js';
import {
  installedManifest,
  node,
  packedTarball,
  repoRoot,
  scratchApp,
  writeFiles,
} from './scratch-app.js';

const run = promisify(execFile);

// The one tarball the whole test run shares (see packedTarball): the build is the slow part.
let work: string;
let tarball: string;

beforeAll(async () => {
  work = tempDir('idem-install-');
  tarball = await packedTarball();
}, 600_000);

// A NestJS project as `nest new` made them for years: CommonJS, TypeScript's node10 resolution
// (which ignores `exports`), legacy decorators with their metadata.
const NEST_TSCONFIG = {
  compilerOptions: {
    module: 'commonjs',
    moduleResolution: 'node10',
    target: 'ES2022',
    strict: true,
    experimentalDecorators: true,
    emitDecoratorMetadata: true,
    skipLibCheck: true,
    outDir: 'dist',
    types: ['node'],
  },
  include: ['src'],
};

const NEST_MAIN = `import 'reflect-metadata';
import type { AddressInfo } from 'node:net';
import {
  BadRequestException, Body, type CanActivate, Controller, type ExecutionContext, Module,
  type PipeTransform, Post, UseGuards,
} from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { IdempotencyModule, type IdempotencyModuleOptions, Idempotent } from 'drizzle-idempotency/nestjs';
import { openSqliteStore } from 'drizzle-idempotency/sqlite';

const store = openSqliteStore(':memory:');
const options: IdempotencyModuleOptions = { store, retryAfterSeconds: 2 };
let runs = 0;
let release: (() => void) | undefined;

class DenyGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    return context.switchToHttp().getRequest<{ headers: Record<string, string> }>().headers['x-deny'] === undefined;
  }
}

class AmountPipe implements PipeTransform {
  transform(value: { amount?: unknown }) {
    if (typeof value.amount !== 'number') throw new BadRequestException('amount must be a number');
    return value;
  }
}

@Controller('payments')
class PaymentsController {
  @Post()
  @UseGuards(DenyGuard)
  @Idempotent()
  async create(@Body(AmountPipe) body: { amount: number; hold?: boolean }) {
    runs += 1;
    if (body.hold) await new Promise<void>((resolve) => { release = resolve; });
    return { id: runs, amount: body.amount };
  }
}

@Module({ imports: [IdempotencyModule.forRoot(options)], controllers: [PaymentsController] })
class AppModule {}

async function main(): Promise<void> {
  const app = await NestFactory.create(AppModule, { logger: false });
  await app.listen(0, '127.0.0.1');
  const { port } = app.getHttpServer().address() as AddressInfo;
  const send = async (key: string | undefined, body: unknown, headers: Record<string, string> = {}) => {
    const response = await fetch(\`http://127.0.0.1:\${port}/payments\`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(key ? { 'idempotency-key': key } : {}), ...headers },
      body: JSON.stringify(body),
    });
    return {
      status: response.status,
      type: response.headers.get('content-type'),
      replayed: response.headers.get('idempotent-replayed'),
      retryAfter: response.headers.get('retry-after'),
      body: await response.text(),
    };
  };
  const out: Record<string, unknown> = {};
  out.first = await send('"a"', { amount: 1 });
  out.replay = await send('"a"', { amount: 1 });
  out.reused = await send('"a"', { amount: 2 });
  out.missing = await send(undefined, { amount: 1 });
  out.denied = await send('"g"', { amount: 3 }, { 'x-deny': '1' });
  out.afterGuard = await send('"g"', { amount: 3 });
  out.refused = await send('"p"', { amount: 'x' });
  out.afterPipe = await send('"p"', { amount: 4 });
  const held = send('"h"', { amount: 5, hold: true });
  while (store.get('h')?.status !== 'pending') await new Promise((resolve) => setTimeout(resolve, 5));
  out.busy = await send('"h"', { amount: 5, hold: true });
  release?.();
  out.held = await held;
  out.runs = runs;
  await app.close();
  store.close();
  console.log(JSON.stringify(out));
}

void main();
`;

interface Sent {
  status: number;
  type: string | null;
  replayed: string | null;
  retryAfter: string | null;
  body: string;
}

describe('a NestJS application on CommonJS and node10 resolution, from the tarball', () => {
  it('compiles, replays, answers 422/409/400 as problems and never stores a refusal', async () => {
    const app = await scratchApp(join(work, 'nest-app'), tarball);
    // Every subpath's types, as node10 resolution finds them (through typesVersions).
    const subpaths = Object.keys(installedManifest(app).exports).filter(
      (subpath) => subpath !== './package.json',
    );
    const everyType = subpaths
      .map(
        (subpath, index) =>
          `import type * as m${index} from 'drizzle-idempotency${subpath.slice(1)}';`,
      )
      .concat(`export type Every = [${subpaths.map((_, index) => `typeof m${index}`).join(', ')}];`)
      .join('\n');
    writeFiles(app, {
      'tsconfig.json': JSON.stringify(NEST_TSCONFIG, null, 2),
      'src/main.ts': NEST_MAIN,
      'src/every-subpath.ts': everyType,
    });
    await node(app, [
      join(repoRoot, 'node_modules', 'typescript', 'bin', 'tsc'),
      '-p',
      'tsconfig.json',
    ]);
    const out = JSON.parse((await node(app, ['dist/main.js'])).stdout) as Record<string, Sent> & {
      runs: number;
    };
    expect(out.first?.status).toBe(201);
    expect(out.replay).toMatchObject({ status: 201, replayed: 'true', body: out.first?.body });
    expect(out.reused).toMatchObject({
      status: 422,
      type: expect.stringMatching(/^application\/problem\+json/),
    });
    expect(out.missing).toMatchObject({
      status: 400,
      type: expect.stringMatching(/^application\/problem\+json/),
    });
    expect(out.denied?.status).toBe(403);
    expect(out.afterGuard).toMatchObject({ status: 201, replayed: null });
    expect(out.refused?.status).toBe(400);
    expect(out.afterPipe).toMatchObject({ status: 201, replayed: null });
    expect(out.busy).toMatchObject({
      status: 409,
      type: expect.stringMatching(/^application\/problem\+json/),
    });
    expect(out.busy?.retryAfter).toBe('2');
    expect(out.held?.status).toBe(201);
    expect(out.runs).toBe(4);
  });
});

describe('the documentation in the tarball', () => {
  it("ships every file the README's and the docs' relative links name", async () => {
    const app = await scratchApp(join(work, 'docs-app'), tarball);
    const installed = join(app, 'node_modules', 'drizzle-idempotency');
    const pages = [
      'README.md',
      ...readdirSync(join(installed, 'docs')).map((name) => `docs/${name}`),
    ];
    expect(pages).toContain('docs/http.md');
    for (const page of pages) {
      const text = readFileSync(join(installed, page), 'utf8');
      for (const [, target] of text.matchAll(/\]\((?!https?:|#|mailto:)([^)#\s]+)/g)) {
        const file = join(installed, dirname(page), target as string);
        expect(existsSync(file), `${page} → ${target}`).toBe(true);
      }
    }
  });
});

// Express's and Fastify's older and current majors, each installed from the registry with a
// plain `npm install` (no --legacy-peer-deps) next to the tarball, then serving a replay. PGlite
// is the store: it installs without a native build.
const MAJORS = [
  { name: 'Express 4 and Fastify 4', express: '4.22.3', fastify: '4.29.1' },
  { name: 'Express 5 and Fastify 5', express: '5.3.0', fastify: '5.12.8' },
];

const SERVE = `
import { PGlite } from '@electric-sql/pglite';
import { drizzle } from 'drizzle-orm/pglite';
import express from 'express';
import Fastify from 'fastify';
import { applyPgMigrations, PgIdempotencyStore } from 'drizzle-idempotency/pg';
import { expressIdempotency } from 'drizzle-idempotency/express';
import { fastifyIdempotency } from 'drizzle-idempotency/fastify';

const pglite = new PGlite();
const db = drizzle({ client: pglite });
await applyPgMigrations(db);
const store = new PgIdempotencyStore(db);
let runs = 0;

const app = express();
app.post('/pay', express.json(), expressIdempotency(store), (req, res) => {
  runs += 1;
  res.status(201).json({ run: runs, amount: req.body.amount });
});
const server = app.listen(0, '127.0.0.1');
await new Promise((resolve) => server.once('listening', resolve));

const fastify = Fastify();
fastify.post('/pay', { ...fastifyIdempotency(store) }, async (request, reply) => {
  runs += 1;
  reply.code(201);
  return { run: runs, amount: request.body.amount };
});
await fastify.listen({ port: 0, host: '127.0.0.1' });

async function twice(port, key) {
  const send = () => fetch('http://127.0.0.1:' + port + '/pay', {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': key },
    body: JSON.stringify({ amount: 7 }),
  });
  const first = await send();
  const second = await send();
  return {
    statuses: [first.status, second.status],
    replayed: second.headers.get('idempotent-replayed'),
    same: (await first.text()) === (await second.text()),
  };
}

const out = {
  express: await twice(server.address().port, '"e"'),
  fastify: await twice(fastify.server.address().port, '"f"'),
  versions: [(await import('express/package.json', { with: { type: 'json' } })).default.version,
    (await import('fastify/package.json', { with: { type: 'json' } })).default.version],
  runs,
};
server.close();
await fastify.close();
await pglite.close();
console.log(JSON.stringify(out));
`;

describe('installs with a plain npm install next to each supported framework major', () => {
  for (const major of MAJORS) {
    it(`${major.name}: installs and replays`, async () => {
      const app = join(work, `app-${major.express}`);
      mkdirSync(app);
      const manifest = {
        name: 'scratch-app',
        version: '0.0.0',
        private: true,
        type: 'module',
        dependencies: {
          '@electric-sql/pglite': '0.5.17',
          'drizzle-idempotency': `file:${tarball}`,
          'drizzle-orm': '0.45.4',
          express: major.express,
          fastify: major.fastify,
        },
      };
      writeFileSync(join(app, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
      writeFileSync(join(app, 'serve.mjs'), SERVE);
      await run('npm', ['install', '--no-audit', '--no-fund', '--ignore-scripts'], {
        cwd: app,
        timeout: 300_000,
        maxBuffer: 16 * 1024 * 1024,
      });
      const out = JSON.parse((await node(app, ['serve.mjs'])).stdout) as {
        express: { statuses: number[]; replayed: string | null; same: boolean };
        fastify: { statuses: number[]; replayed: string | null; same: boolean };
        versions: string[];
        runs: number;
      };
      expect(out.versions).toEqual([major.express, major.fastify]);
      for (const framework of [out.express, out.fastify]) {
        expect(framework).toEqual({ statuses: [201, 201], replayed: 'true', same: true });
      }
      expect(out.runs).toBe(2);
    }, 600_000);
  }
});
