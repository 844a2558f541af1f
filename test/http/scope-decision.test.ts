import 'reflect-metadata';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { expressIdempotency, expressTransaction } from '../../src/http/express.js';
import { fastifyIdempotency, fastifyTransaction } from '../../src/http/fastify.js';
import { fetchIdempotency, fetchTransaction } from '../../src/http/fetch.js';
import { honoIdempotency, honoTransaction } from '../../src/http/hono.js';
import { IdempotencyModule, Idempotent } from '../../src/http/nestjs.js';
import { InvalidOptionError } from '../../src/index.js';
import {
  openSqliteStore,
  type SqliteIdempotencyStore,
  sqliteTransaction,
} from '../../src/sqlite/index.js';
import { freshDbPath, tempDir } from '../support/temp.js';

const dir = tempDir('idem-scope-decision-');
let store: SqliteIdempotencyStore<unknown>;

beforeEach(() => {
  store = openSqliteStore(freshDbPath(dir));
});

afterEach(() => {
  store.close();
});

const answer = () => ({ status: 201 });

// Every way to build the layer, given the options as a user would write them.
const builders: Record<string, (options: never) => unknown> = {
  expressIdempotency: (options) => expressIdempotency(store, options),
  expressTransaction: (options) => expressTransaction(sqliteTransaction(store), answer, options),
  fastifyIdempotency: (options) => fastifyIdempotency(store, options),
  fastifyTransaction: (options) => fastifyTransaction(sqliteTransaction(store), answer, options),
  fetchIdempotency: (options) => fetchIdempotency(store, options),
  fetchTransaction: (options) => fetchTransaction(sqliteTransaction(store), answer, options),
  honoIdempotency: (options) => honoIdempotency(store, options),
  honoTransaction: (options) => honoTransaction(sqliteTransaction(store), answer, options),
  'IdempotencyModule.forRoot': (options: object) =>
    IdempotencyModule.forRoot({ ...options, store } as never),
};

function refusal(build: () => unknown): InvalidOptionError {
  try {
    build();
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidOptionError);
    return error as InvalidOptionError;
  }
  throw new Error('the layer was built without a scope decision');
}

describe('a scope decision is required on every adapter', () => {
  for (const [name, build] of Object.entries(builders)) {
    it(`${name}: refuses no scope, naming both choices, and builds with a function or 'global'`, () => {
      for (const options of [{}, { ttlSeconds: 60 }, { scope: undefined }]) {
        const error = refusal(() => build(options as never));
        expect(error.message).toContain('scope: (request) => callerId');
        expect(error.message).toContain("scope: 'global'");
      }
      for (const bad of ['x-client', 'GLOBAL', true, 0]) {
        expect(refusal(() => build({ scope: bad } as never)).message).toContain(String(bad));
      }
      expect(() => build({ scope: 'global' } as never)).not.toThrow();
      expect(() => build({ scope: () => 'client-7' } as never)).not.toThrow();
    });
  }

  it('refuses a mistyped scope on one NestJS route when the class is defined', () => {
    expect(() => Idempotent({ scope: 'client' as never })).toThrow(InvalidOptionError);
    expect(() => Idempotent({ scope: 'global' })).not.toThrow();
    expect(() => Idempotent()).not.toThrow();
  });

  it('IdempotencyModule.forRootAsync: the application refuses to start without a scope decision', async () => {
    class AppModule {}
    Module({
      imports: [IdempotencyModule.forRootAsync({ useFactory: () => ({ store }) as never })],
    })(AppModule);
    // abortOnError: false, so Nest rejects instead of ending the process.
    const started = NestFactory.create(AppModule, new ExpressAdapter(), {
      logger: false,
      abortOnError: false,
    });
    await expect(started).rejects.toThrow(/scope: 'global'/);
  });
});
