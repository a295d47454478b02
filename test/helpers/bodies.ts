// Request bodies of the domain APIs, built from one valid default each: a test
// says only what matters to it (`orderBody({ paymentTimeoutSeconds: 1 })`).
import { randomUUID } from 'node:crypto';
import type { NewOrder } from '../../src/modules/orders/orders.repository.js';

/** A valid POST /orders body: one item, the default payment window unless given. */
export function orderBody(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return { customerId: 'c', items: [{ sku: 'S', quantity: 1, unitPriceCents: 100 }], ...overrides };
}

/** An order row as the repository's insertMany takes it: one item, of `client`, its window and payment reminder lead as given. */
export function newOrderRow(client: string, timeoutSeconds: number, o: { id?: string; lead?: number | null } = {}): NewOrder {
  return {
    id: o.id ?? randomUUID(),
    client,
    customerId: 'c',
    currency: 'EUR',
    totalCents: 100,
    timeoutSeconds,
    reminderBeforeSeconds: o.lead ?? null,
    idempotencyKey: null,
    requestHash: null,
    items: [{ sku: 's', quantity: 1, unitPriceCents: 100 }],
  };
}

/** A valid POST /appointments body: an hour ahead, reminded by e-mail a day before (so at once) unless given. */
export function appointmentBody(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    customerId: 'c',
    contact: 'c@example.com',
    channel: 'email',
    startsAt: new Date(Date.now() + 3_600_000).toISOString(),
    remindBeforeSeconds: 86_400,
    ...overrides,
  };
}

/** A valid PUT /areas/:code body. */
export function areaBody(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return { vehiclePlate: 'AB-123', sorterContact: 'sorters@example.com', ...overrides };
}
