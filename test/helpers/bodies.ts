// Request bodies of the domain APIs, built from one valid default each: a test
// says only what matters to it (`orderBody({ paymentTimeoutSeconds: 1 })`).

/** A valid POST /orders body: one item, the default payment window unless given. */
export function orderBody(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return { customerId: 'c', items: [{ sku: 'S', quantity: 1, unitPriceCents: 100 }], ...overrides };
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
