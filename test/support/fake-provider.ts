import { createServer, type Server } from 'node:http';

interface Charge {
  readonly order: string;
  readonly id: string;
}

/**
 * A payment provider on node:http that keeps its own idempotency keys, as Stripe does: `POST` a
 * JSON `{ order }` with an `Idempotency-Key` header; a charge retried with the same key gets the
 * first charge back without being executed again. It counts, per order, the requests it got,
 * the charges it executed and the keys it saw.
 */
export function fakeProvider() {
  const byKey = new Map<string, Charge>();
  const executions = new Map<string, number>();
  const keysOfOrder = new Map<string, Set<string>>();
  const requests = new Map<string, number>();
  const server: Server = createServer((request, response) => {
    let body = '';
    request.on('data', (chunk: Buffer) => {
      body += chunk.toString();
    });
    request.on('end', () => {
      const key = String(request.headers['idempotency-key'] ?? '');
      const { order } = JSON.parse(body) as { order: string };
      requests.set(order, (requests.get(order) ?? 0) + 1);
      const seen = keysOfOrder.get(order) ?? new Set<string>();
      seen.add(key);
      keysOfOrder.set(order, seen);
      let charge = byKey.get(key);
      if (charge === undefined) {
        executions.set(order, (executions.get(order) ?? 0) + 1);
        charge = { order, id: `ch_${executions.size}_${Math.random().toString(36).slice(2, 8)}` };
        byKey.set(key, charge);
      }
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(JSON.stringify(charge));
    });
  });
  return { server, executions, keysOfOrder, requests };
}
