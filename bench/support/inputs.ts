import { createHash, randomUUID } from 'node:crypto';
import type { JsonValue } from '../../src/core/json.js';

/** A JSON object, as a stored answer is. */
export type JsonObject = { [key: string]: JsonValue };

/** A realistic key and fingerprint: a UUID, as clients send, and a SHA-256 in hex, as fingerprints are. */
export interface RealisticKey {
  readonly key: string;
  readonly fingerprint: string;
}

/** `count` fresh UUID keys, each with a 64-hex fingerprint; generated before any timing starts. */
export function realisticKeys(count: number): RealisticKey[] {
  return Array.from({ length: count }, () => {
    const key = randomUUID();
    return { key, fingerprint: createHash('sha256').update(key).digest('hex') };
  });
}

/**
 * A payment API's answer whose JSON text is about `bytes` long: a charge with metadata and line
 * items, the shape (nested objects, arrays, numbers, strings) the store's checks walk. `index`
 * varies one field so no two answers are the same object.
 */
export function answerOfSize(bytes: number, index: number): JsonObject {
  const items: JsonObject[] = [];
  const answer: JsonObject = {
    id: `ch_${index.toString(36).padStart(24, '0')}`,
    object: 'charge',
    amount: 4200 + index,
    currency: 'eur',
    captured: true,
    created: 1_764_460_800 + index,
    customer: 'cus_Q3zt6bV8kW1xYp',
    description: 'Order 2026-11-30 / web checkout',
    metadata: { order: `ord_${index}`, channel: 'web', attempt: 1 },
    items,
  };
  for (let line = 0; JSON.stringify(answer).length < bytes - 30; line++) {
    items.push({ sku: `sku_${line.toString().padStart(6, '0')}`, qty: 1 + (line % 3), unit: 1299 });
  }
  return answer;
}
