import { randomUUID } from 'node:crypto';
import type { Payment } from './schema.js';

/** The card processor the service charges through. */
export interface PaymentProvider {
  /**
   * Charges `payment` and answers the charge's id. A charge retried with the same
   * `idempotencyKey` gets the first charge's id back without being executed again.
   */
  charge(payment: Payment, idempotencyKey: string): Promise<string>;
  /** How many charges it executed. */
  readonly executed: number;
}

/**
 * A stand-in for a real processor, in this process: it keeps its own idempotency keys, as
 * Stripe does, so the service's derived key (`step.key`) makes a charge repeated after a crash
 * run once.
 */
export function fakeProvider(): PaymentProvider {
  const charges = new Map<string, string>();
  return {
    async charge(_payment, idempotencyKey) {
      let id = charges.get(idempotencyKey);
      if (id === undefined) {
        id = `ch_${randomUUID()}`;
        charges.set(idempotencyKey, id);
      }
      return id;
    },
    get executed() {
      return charges.size;
    },
  };
}
