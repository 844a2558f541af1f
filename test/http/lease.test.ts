import { once } from 'node:events';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { expressIdempotency } from '../../src/http/express.js';
import { fetchIdempotency } from '../../src/http/fetch.js';
import {
  AnswerNotRecordedError,
  type IdempotentRequest,
  idempotent,
  type OutcomeEvent,
  RequestSupersededError,
} from '../../src/http/index.js';
import type { LeasedIdempotencyStore } from '../../src/index.js';
import { type StoreFactory, storeFactories } from '../support/store-factories.js';
import { deferred, until } from '../support/waiting.js';

const request: IdempotentRequest = {
  method: 'POST',
  path: '/pay',
  headers: { 'idempotency-key': 'k1' },
  body: { amount: 1 },
};

/** The real store in every way but `finish`, which fails as when the database goes away. */
function finishFails(store: LeasedIdempotencyStore<unknown>): LeasedIdempotencyStore<unknown> {
  return new Proxy(store, {
    get(target, property) {
      if (property === 'finish') {
        return async () => {
          throw new Error('the connection to the database was lost');
        };
      }
      const value = Reflect.get(target, property, target) as unknown;
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

function describeLeases(factory: StoreFactory): void {
  describe(`leases through the HTTP layer on ${factory.name}`, () => {
    let store: LeasedIdempotencyStore<unknown>;
    let closeStore: () => Promise<void>;
    let clock: number;
    let events: OutcomeEvent[];
    const now = () => clock;
    const onOutcome = (event: OutcomeEvent) => {
      events.push(event);
    };

    beforeEach(async () => {
      const opened = await factory.open();
      store = opened.store as LeasedIdempotencyStore<unknown>;
      closeStore = opened.close;
      clock = 1_000;
      events = [];
    });

    afterEach(async () => {
      await closeStore();
    });

    it('lets a retry take over a lapsed key, refuses the stalled owner and keeps one answer', async () => {
      const layer = idempotent(store, { now, leaseSeconds: 30, onOutcome });
      const first = await layer.begin(request);
      if (first.action !== 'run') throw new Error(`expected to run, got ${first.action}`);
      const a = (await store.get('k1'))?.fencingToken ?? 0;

      // The first owner freezes past its lease (no renewal: the beat runs every 10 s of real time).
      clock += 31;
      const second = await layer.begin(request);
      if (second.action !== 'run') throw new Error(`expected a takeover, got ${second.action}`);
      const b = (await store.get('k1'))?.fencingToken ?? 0;
      expect(b).toBeGreaterThan(a);

      const stalled = await first.execution.complete({ status: 201, body: { by: 'first' } });
      expect(stalled.outcome).toBe('problem');
      if (stalled.outcome !== 'problem') return;
      expect(stalled.problem).toBeInstanceOf(RequestSupersededError);
      expect(stalled.response.status).toBe(409);
      expect(await store.get('k1')).toMatchObject({ status: 'pending', fencingToken: b });
      // Nor can the stalled owner release the new owner's key.
      await first.execution.fail(new Error('late'));
      expect(await store.get('k1')).toMatchObject({ status: 'pending', fencingToken: b });

      const taken = await second.execution.complete({ status: 201, body: { by: 'second' } });
      expect(taken.outcome).toBe('executed');
      const replay = await layer.handle(request, () => ({ status: 500 }));
      expect(replay.outcome).toBe('replayed');
      expect(Buffer.from(replay.response.body as Uint8Array).toString()).toBe('{"by":"second"}');
      expect(events.map((event) => [event.outcome, event.fencingToken, event.takenOver])).toEqual([
        ['superseded', a, false],
        ['failed', a, false],
        ['executed', b, true],
        ['replayed', undefined, undefined],
      ]);
    });

    // The ABA of issue 26: A freezes past its lease, B takes the key over and answers 503 (not
    // stored, so the key is released), C claims the key afresh. The handler runs three times.
    async function abaUntilC(layer: ReturnType<typeof idempotent>) {
      const a = await layer.begin(request);
      if (a.action !== 'run') throw new Error(`expected A to run, got ${a.action}`);
      clock += 31;
      const b = await layer.begin(request);
      if (b.action !== 'run') throw new Error(`expected B to take over, got ${b.action}`);
      expect((await b.execution.complete({ status: 503 })).outcome).toBe('notStored');
      expect(await store.get('k1')).toBeNull();
      const c = await layer.begin(request);
      if (c.action !== 'run') throw new Error(`expected C to claim afresh, got ${c.action}`);
      return { a: a.execution, c: c.execution };
    }

    it("refuses A's late answer after B released the key and C claimed it again: C's answer is stored (ABA)", async () => {
      const layer = idempotent(store, { now, leaseSeconds: 30, onOutcome });
      const { a, c } = await abaUntilC(layer);
      const late = await a.complete({ status: 201, body: { by: 'A' } });
      expect(late.outcome).toBe('problem');
      if (late.outcome !== 'problem') return;
      expect(late.problem).toBeInstanceOf(RequestSupersededError);
      expect(await store.get('k1')).toMatchObject({ status: 'pending', response: null });
      const done = await c.complete({ status: 201, body: { by: 'C' } });
      expect(done.outcome).toBe('executed');
      let runs = 0;
      const replay = await layer.handle(request, () => {
        runs += 1;
        return { status: 500 };
      });
      expect(replay.outcome).toBe('replayed');
      expect(Buffer.from(replay.response.body as Uint8Array).toString()).toBe('{"by":"C"}');
      expect(runs).toBe(0);
      expect(events.map((event) => [event.outcome, event.takenOver])).toEqual([
        ['notStored', true],
        ['superseded', false],
        ['executed', false],
        ['replayed', undefined],
      ]);
    });

    it("keeps C's key when A throws late: a duplicate D while C runs gets 409, C's answer is stored (ABA)", async () => {
      const layer = idempotent(store, { now, leaseSeconds: 30 });
      const { a, c } = await abaUntilC(layer);
      const token = (await store.get('k1'))?.fencingToken;
      await a.fail(new Error('A wakes up and throws'));
      expect(await store.get('k1')).toMatchObject({ status: 'pending', fencingToken: token });
      let runs = 0;
      const d = await layer.handle(request, () => {
        runs += 1;
        return { status: 201, body: { by: 'D' } };
      });
      expect(d.response.status).toBe(409);
      expect(runs).toBe(0);
      expect((await c.complete({ status: 201, body: { by: 'C' } })).outcome).toBe('executed');
      const replay = await layer.handle(request, () => ({ status: 500 }));
      expect(Buffer.from(replay.response.body as Uint8Array).toString()).toBe('{"by":"C"}');
    });

    it("through the Fetch adapter: A's late answer gets 409, a duplicate D while C runs gets 409, C's answer is stored (ABA)", async () => {
      const gates = { a: deferred(), c: deferred() };
      const started = { a: deferred(), c: deferred() };
      let runs = 0;
      const handler = fetchIdempotency(store, { scope: 'global', now, leaseSeconds: 30 })(
        async () => {
          runs += 1;
          if (runs === 1) {
            started.a.resolve();
            await gates.a.promise;
            return Response.json({ by: 'A' }, { status: 201 });
          }
          if (runs === 2) return new Response('busy', { status: 503 });
          started.c.resolve();
          await gates.c.promise;
          return Response.json({ by: 'C' }, { status: 201 });
        },
      );
      const send = () =>
        handler(
          new Request('http://127.0.0.1/pay', {
            method: 'POST',
            headers: { 'idempotency-key': 'k1', 'content-type': 'application/json' },
            body: '{"amount":1}',
          }),
        );
      const a = send();
      await started.a.promise;
      clock += 31;
      expect((await send()).status).toBe(503);
      expect(await store.get('k1')).toBeNull();
      const c = send();
      await started.c.promise;
      gates.a.resolve();
      const late = await a;
      expect(late.status).toBe(409);
      expect(((await late.json()) as { type: string }).type).toMatch(/request-superseded$/);
      expect((await send()).status).toBe(409);
      gates.c.resolve();
      expect((await c).status).toBe(201);
      const replay = await send();
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(await replay.json()).toEqual({ by: 'C' });
      expect(runs).toBe(3);
    });

    it("refuses the old owner's answer after an operator released its live key and a new request claimed it", async () => {
      const layer = idempotent(store, { now, leaseSeconds: 30 });
      const a = await layer.begin(request);
      if (a.action !== 'run') throw new Error(`expected A to run, got ${a.action}`);
      expect(await store.releasePending('k1')).toBe('released');
      const c = await layer.begin(request);
      if (c.action !== 'run') throw new Error(`expected C to claim afresh, got ${c.action}`);
      const late = await a.execution.complete({ status: 201, body: { by: 'A' } });
      expect(late.outcome).toBe('problem');
      await a.execution.fail(new Error('late'));
      expect(await store.get('k1')).toMatchObject({ status: 'pending', response: null });
      expect((await c.execution.complete({ status: 201, body: { by: 'C' } })).outcome).toBe(
        'executed',
      );
      const replay = await layer.handle(request, () => ({ status: 500 }));
      expect(Buffer.from(replay.response.body as Uint8Array).toString()).toBe('{"by":"C"}');
    });

    it('answers 409 with a Retry-After of the lease left, and never takes over a live lease', async () => {
      const layer = idempotent(store, { now, leaseSeconds: 30 });
      const first = await layer.begin(request);
      expect(first.action).toBe('run');
      const token = (await store.get('k1'))?.fencingToken;
      clock += 10.5;
      const busy = await layer.handle(request, () => ({ status: 201 }));
      expect(busy.outcome).toBe('problem');
      expect(busy.response.status).toBe(409);
      expect(busy.response.headers?.['retry-after']).toBe('20');
      expect((await store.get('k1'))?.fencingToken).toBe(token);
      if (first.action === 'run') await first.execution.fail(new Error('done with it'));
    });

    it('answers 409 with the configured estimate as Retry-After while it is below the lease left', async () => {
      const layer = idempotent(store, { now, leaseSeconds: 30, retryAfterSeconds: 2 });
      const first = await layer.begin(request);
      expect(first.action).toBe('run');
      const busy = await layer.handle(request, () => ({ status: 201 }));
      expect(busy.response.status).toBe(409);
      expect(busy.response.headers?.['retry-after']).toBe('2');
      clock += 29;
      const late = await layer.handle(request, () => ({ status: 201 }));
      expect(late.response.headers?.['retry-after']).toBe('1');
      const slow = idempotent(store, { now, leaseSeconds: 30, retryAfterSeconds: 60 });
      clock -= 19;
      const capped = await slow.handle(request, () => ({ status: 201 }));
      expect(capped.response.headers?.['retry-after']).toBe('20');
      if (first.action === 'run') await first.execution.fail(new Error('done with it'));
    });

    it('marks an executed answer it could not record unrecorded: never taken over', async () => {
      let runs = 0;
      const layer = idempotent(finishFails(store), { now, leaseSeconds: 30 });
      const result = await layer.handle(request, () => {
        runs += 1;
        return { status: 201, body: { id: 1 } };
      });
      expect(result.outcome).toBe('problem');
      if (result.outcome !== 'problem') return;
      expect(result.problem).toBeInstanceOf(AnswerNotRecordedError);
      expect(await store.get('k1')).toMatchObject({ status: 'pending', unrecorded: true });

      clock += 3_600;
      const retry = await idempotent(store, { now, leaseSeconds: 30 }).handle(request, () => {
        runs += 1;
        return { status: 201 };
      });
      expect(retry.response.status).toBe(409);
      expect(runs).toBe(1);
    });

    it('keeps the key of a live handler running three times its lease (Express, real clock)', async () => {
      const leaseSeconds = 1;
      let runs = 0;
      // The handler stays in flight until the test has seen its key outlive three leases.
      const gate = deferred();
      const app = express();
      app.use(express.json());
      app.post(
        '/pay',
        expressIdempotency(store, { scope: 'global', leaseSeconds }),
        async (req, res) => {
          runs += 1;
          await gate.promise;
          res.status(201).json({ paid: req.body });
        },
      );
      const server: Server = app.listen(0, '127.0.0.1');
      await once(server, 'listening');
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/pay`;
      const send = () =>
        fetch(url, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'idempotency-key': 'slow' },
          body: '{"amount":1}',
        });
      try {
        const slow = send();
        await until(async () => (await store.get('slow')) !== null);
        const { fencingToken: token, leaseUntil: claimed } = (await store.get('slow')) as {
          fencingToken: number;
          leaseUntil: number;
        };
        // A renewal sets the lease to its own time plus one lease: one past claimed + 3 leases
        // was made more than three leases after the claim, by a handler still running.
        await until(
          async () => ((await store.get('slow'))?.leaseUntil ?? 0) > claimed + 3 * leaseSeconds,
          50,
        );
        const duplicate = await send();
        expect(duplicate.status).toBe(409);
        expect(Number(duplicate.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
        expect(await store.get('slow')).toMatchObject({ status: 'pending', fencingToken: token });

        gate.resolve();
        const answer = await slow;
        expect(answer.status).toBe(201);
        expect(await store.get('slow')).toMatchObject({ status: 'done', fencingToken: token });
        const retry = await send();
        expect(retry.headers.get('idempotent-replayed')).toBe('true');
        expect(runs).toBe(1);
      } finally {
        gate.resolve();
        server.closeAllConnections();
        await new Promise((resolve) => server.close(resolve));
      }
    });
  });
}

for (const factory of storeFactories()) describeLeases(factory);
