// `@IdempotencyStep()` on both of Nest's platforms: the handler's step function, whose recorded
// steps a retry gets back after the handler failed, without running them again.
import 'reflect-metadata';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Controller, Post } from '@nestjs/common';
import { afterEach, describe, expect, it } from 'vitest';
import type { Step } from '../../src/core/steps.js';
import { IdempotencyModule, IdempotencyStep, Idempotent } from '../../src/http/nestjs.js';
import {
  openSqliteStore,
  type SqliteHandlerTransaction,
  type SqliteIdempotencyStore,
  sqliteSteps,
} from '../../src/sqlite/index.js';
import { nestPlatforms, type RunningNestApp, startNestApp } from '../support/nest-app.js';

let ran = 0;
let failNext = true;

@Controller()
class PaymentsController {
  @Post('pay')
  @Idempotent()
  async pay(@IdempotencyStep() step: Step<SqliteHandlerTransaction>): Promise<unknown> {
    const charge = await step('charge', ({ key }) => {
      ran += 1;
      return key.slice(0, 8);
    });
    if (failNext) {
      failNext = false;
      throw new Error('the handler crashed after the charge');
    }
    return { charge, steps: [...step.recorded] };
  }
}

describe.each(nestPlatforms)('@IdempotencyStep() on NestJS with %s', (platform) => {
  let running: RunningNestApp | undefined;
  let store: SqliteIdempotencyStore<unknown> | undefined;
  let dir: string | undefined;

  afterEach(async () => {
    await running?.close();
    store?.close();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  it('injects the step function, and a retry goes on from the recorded step', async () => {
    dir = mkdtempSync(join(tmpdir(), 'idem-nest-steps-'));
    store = openSqliteStore(join(dir, 'keys.db'));
    ran = 0;
    failNext = true;
    const steps = sqliteSteps(store, { secret: 'a secret of at least sixteen bytes' });
    running = await startNestApp(platform, {
      imports: [IdempotencyModule.forRoot({ store, scope: 'global', steps })],
      controllers: [PaymentsController],
    });
    const pay = () =>
      fetch(`${running?.url}/pay`, { method: 'POST', headers: { 'idempotency-key': 'nest-1' } });

    expect((await pay()).status).toBe(500);
    const finished = await pay();
    expect(finished.status).toBe(201);
    const body = await finished.text();
    expect(JSON.parse(body)).toEqual({ charge: expect.any(String), steps: ['charge'] });
    const replayed = await pay();
    expect(replayed.headers.get('idempotent-replayed')).toBe('true');
    expect(await replayed.text()).toBe(body);
    expect(ran).toBe(1);
  });
});
