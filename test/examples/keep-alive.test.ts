import { once } from 'node:events';
import { Agent, type IncomingMessage, request } from 'node:http';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type PaymentsService, startPaymentsService } from '../support/payments-service.js';
import { tempDir } from '../support/temp.js';

const dir = tempDir('idem-keep-alive-');

interface Answer {
  readonly status: number;
  readonly headers: IncomingMessage['headers'];
  readonly body: string;
}

interface Sent {
  readonly headers: Record<string, string>;
  /** The body, in chunks: one chunk with a Content-Length, several without one (chunked). */
  readonly chunks: readonly Buffer[];
  readonly chunked?: boolean;
}

// A POST through `agent`, whose one keep-alive socket every request of a test shares.
async function send(url: string, agent: Agent, key: string, sent: Sent): Promise<Answer> {
  const size = sent.chunks.reduce((total, chunk) => total + chunk.byteLength, 0);
  const req = request(`${url}/payments`, {
    method: 'POST',
    agent,
    headers: {
      'content-type': 'application/json',
      'idempotency-key': `"${key}"`,
      ...(sent.chunked ? {} : { 'content-length': String(size) }),
      ...sent.headers,
    },
  });
  // The server may answer and close before the whole body is written: that is not a failure of
  // the request, whose answer is what the test reads.
  req.on('error', () => undefined);
  const answered = once(req, 'response') as Promise<[IncomingMessage]>;
  for (const chunk of sent.chunks) req.write(chunk);
  req.end();
  const [res] = await answered;
  let body = '';
  for await (const chunk of res) body += String(chunk);
  return { status: res.statusCode ?? 0, headers: res.headers, body };
}

const payment: Sent = {
  headers: {},
  chunks: [Buffer.from(JSON.stringify({ amount: 1, currency: 'EUR' }))],
};
const padded = Buffer.from(
  JSON.stringify({ amount: 1, currency: 'EUR', pad: 'x'.repeat(200_000) }),
);
const bomb = gzipSync(Buffer.concat([Buffer.from('{"pad":"'), Buffer.alloc(20_000_000, 'a')]));

describe('the payments service closes a keep-alive connection whose body it did not read', () => {
  let service: PaymentsService;
  let url: string;

  beforeAll(async () => {
    service = await startPaymentsService(dir);
    url = service.url;
  });

  afterAll(() => service.close());

  it.each([
    ['a gzip bomb', { headers: { 'content-encoding': 'gzip' }, chunks: [bomb] }],
    ['a Content-Length over the limit', { headers: {}, chunks: [padded] }],
    [
      'a chunked body over the limit',
      {
        headers: {},
        chunked: true,
        chunks: Array.from({ length: 20 }, (_, n) => padded.subarray(n * 10_000, (n + 1) * 10_000)),
      },
    ],
  ] as const)(
    '%s: 413 with Connection: close, then the next request on the agent succeeds',
    async (name, refused) => {
      const agent = new Agent({ keepAlive: true, maxSockets: 1 });
      try {
        // The connection is open and reused before the refusal.
        const before = await send(url, agent, `${name}-before`, payment);
        expect(before.status).toBe(201);

        const refusal = await send(url, agent, `${name}-refused`, refused);
        expect(refusal.status).toBe(413);
        expect(refusal.headers.connection).toBe('close');
        expect(refusal.headers['content-type']).toMatch(/^application\/problem\+json/);

        const after = await send(url, agent, `${name}-after`, payment);
        expect(after.status).toBe(201);
        expect(JSON.parse(after.body)).toMatchObject({ amount: 1, currency: 'EUR' });
      } finally {
        agent.destroy();
      }
    },
  );

  it('refuses a declared Content-Length over the limit before the body is sent', async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const req = request(`${url}/payments`, {
        method: 'POST',
        agent,
        headers: {
          'content-type': 'application/json',
          'idempotency-key': '"declared"',
          'content-length': String(10_000_000),
        },
      });
      req.on('error', () => undefined);
      // A first piece of the body, and no more: the parser would wait for the rest forever.
      req.write('{"amount":1,');
      const [res] = (await once(req, 'response')) as [IncomingMessage];
      expect(res.statusCode).toBe(413);
      expect(res.headers.connection).toBe('close');
      res.resume();
      await once(res, 'end');
      req.destroy();

      const after = await send(url, agent, 'declared-after', payment);
      expect(after.status).toBe(201);
      expect(await service.store.get('declared')).toBeNull();
    } finally {
      agent.destroy();
    }
  });
});
