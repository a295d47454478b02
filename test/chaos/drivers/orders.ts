// Orders load: orders with short payment windows created in bursts over a
// spread of time (a burst shares one window, so its deadlines fall together),
// most of them paid by concurrent clients at a random moment around their
// deadline, the rest left to expire. Records what each client was told.
import { type Http, rand, sleepUntil } from './http.js';

export type OrderRecord = {
  id: string;
  expiresAt: number;
  /** The final answer to the order's pay request (after retries), or null when it was never paid. */
  pay: { status: number; code: string | null } | null;
};

export type OrdersLoad = {
  /** Distinguishes this run's Idempotency-Keys and customers. */
  tag: string;
  count: number;
  /** Orders created at once, with one payment window. */
  burst: number;
  /** Bursts are spread evenly over this long (ms). */
  spreadMs: number;
  /** Payment windows, picked at random per burst (whole seconds: the API takes no fractions). */
  windowSeconds: readonly number[];
  /** Share of orders that get a pay attempt. */
  payShare: number;
  /** A pay is sent at the deadline + U(-jitter, +jitter) ms. */
  payJitterMs: number;
  /** Told each order's deadline (ms since epoch), as soon as it is known. */
  onDue?: (at: number) => void;
};

export async function driveOrders(http: Http, load: OrdersLoad): Promise<OrderRecord[]> {
  const t0 = Date.now();
  const bursts = Math.ceil(load.count / load.burst);
  const windows = Array.from({ length: bursts }, () => load.windowSeconds[Math.floor(Math.random() * load.windowSeconds.length)] as number);
  const one = async (i: number): Promise<OrderRecord> => {
    const b = Math.floor(i / load.burst);
    await sleepUntil(t0 + (b * load.spreadMs) / bursts);
    const window = windows[b] as number;
    const created = await http.send(
      'POST',
      '/orders',
      { customerId: `${load.tag}-${i}`, items: [{ sku: 'CHAOS', quantity: 1, unitPriceCents: 100 }], paymentTimeoutSeconds: window },
      { 'idempotency-key': `${load.tag}-order-${i}` },
    );
    if (created.status !== 201) throw new Error(`order ${i}: create answered ${created.status} ${JSON.stringify(created.body)}`);
    const record: OrderRecord = { id: String(created.body.id), expiresAt: Date.parse(String(created.body.expiresAt)), pay: null };
    load.onDue?.(record.expiresAt);
    if (Math.random() >= load.payShare) return record;
    await sleepUntil(record.expiresAt + rand(-load.payJitterMs, load.payJitterMs));
    const paid = await http.send('POST', `/orders/${record.id}/pay`, { paymentRef: `ref-${record.id}` });
    record.pay = { status: paid.status, code: typeof paid.body.code === 'string' ? paid.body.code : null };
    return record;
  };
  return Promise.all(Array.from({ length: load.count }, (_, i) => one(i)));
}
