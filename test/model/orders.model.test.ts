// Model-based suite of the orders domain: random sequences of creates (alone,
// or in bursts sharing a window, so their expiries go in batches; some
// repeated under their Idempotency-Key), pays, customer cancels, pay and
// cancel raced against each other, reads, time steps around the payment
// windows, receiver behaviours and faults. The rules checked:
// - every answer agrees with the model at once: a 200 from pay only inside
//   the window (by the database clock, within EPS_MS) and never after a
//   cancel, ORDER_EXPIRED only once the window closed, a cancel refused only
//   for a paid order, a repeated create answers the same order;
// - once settled: a 200 from pay means PAID for ever; every other order is
//   CANCELLED, by the customer only if a cancel was answered 200, otherwise by
//   the timeout and never before its deadline; one ORDER_CANCELLED row per
//   cancelled order and none for a paid one, SENT, and the receiver took it
//   (twice at most when a fault cut a send off, never otherwise);
// - the retention pass (run with a cutoff of now, amid the rest) deletes only
//   settled orders whose notice is settled: each one it took is checked as it
//   was last seen, its notice taken by the receiver once (none if paid), and
//   answered 404 from then on.
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isDatabaseUnavailable, isSerializationFailure } from '../../src/core/db-errors.js';
import { runRetention } from '../../src/core/retention.js';
import { createOrdersRepository } from '../../src/modules/orders/orders.repository.js';
import type { Reply } from '../chaos/drivers/http.js';
import { type Real, Step, problems, repeatExplained, runSuite, settled } from './runner.js';
import { type World, startWorld } from './world.js';

// Two clocks meet here (this process's and PostgreSQL's, one host) and a
// request's moment in the database lies between its send and its answer.
const EPS_MS = 100;
const SETTLE_MS = 60_000;

/** An order's row and notices as read just before a retention pass deleted it. */
type Seen = {
  row: { id: string; status: string; paidAt: Date | null; cancelledAt: Date | null; cancelReason: string | null };
  notes: { id: string; orderId: string | null; status: string; attempts: number; redriveRequested: boolean }[];
};
type Order = {
  id: string;
  key: string;
  body: Record<string, unknown>;
  expiresAt: number;
  paid: boolean;
  cancelled: boolean;
  /** Deleted by a retention pass: as last seen if it was settled then ('unknown' if not: it settled in the moment between). */
  purged?: Seen | 'unknown';
};
type Model = { orders: Order[] };

let world: World;
beforeAll(async () => {
  world = await startWorld('orders');
}, 120_000);
afterAll(async () => {
  await world?.close();
});

function fail(what: string, r: Reply): never {
  throw new Error(`${what}: answered ${r.status} ${JSON.stringify(r.body)}`);
}

async function create(m: Model, r: Real, timeoutSeconds: 1 | 2, key: string): Promise<void> {
  const body = { customerId: r.tag, items: [{ sku: 'SKU', quantity: 1 + m.orders.length, unitPriceCents: 100 }], paymentTimeoutSeconds: timeoutSeconds };
  const res = await r.world.http.send('POST', '/orders', body, { 'idempotency-key': key });
  if (res.status !== 201) fail('create', res);
  const expiresAt = Date.parse(String(res.body.expiresAt));
  const createdAt = Date.parse(String(res.body.createdAt));
  if (expiresAt - createdAt !== timeoutSeconds * 1_000) fail(`create: window of ${timeoutSeconds} s`, res);
  m.orders.push({ id: String(res.body.id), key, body, expiresAt, paid: false, cancelled: false });
}

/** Orders created together with one window: they expire together, and their expiry jobs go in batches. */
class CreateBurst extends Step<Model> {
  constructor(
    readonly timeoutSeconds: 1 | 2,
    readonly n: number,
  ) {
    super();
  }
  async act(m: Model, r: Real) {
    const base = m.orders.length;
    await Promise.all(Array.from({ length: this.n }, (_, k) => create(m, r, this.timeoutSeconds, `${r.tag}-b${base}-${k}`)));
  }
  toString() {
    return `CreateBurst(${this.timeoutSeconds}s, ${this.n})`;
  }
}

class Create extends Step<Model> {
  constructor(readonly timeoutSeconds: 1 | 2) {
    super();
  }
  async act(m: Model, r: Real) {
    await create(m, r, this.timeoutSeconds, `${r.tag}-o${m.orders.length}`);
  }
  toString() {
    return `Create(${this.timeoutSeconds}s)`;
  }
}

/** Acts on one of the run's orders, picked by index. */
abstract class OnOrder extends Step<Model> {
  constructor(readonly pick: number) {
    super();
  }
  override check(m: Readonly<Model>) {
    return m.orders.length > 0;
  }
  order(m: Model): Order {
    return m.orders[this.pick % m.orders.length] as Order;
  }
}

class RepeatCreate extends OnOrder {
  // A key whose order retention deleted is free again: not this suite's concern.
  override check(m: Readonly<Model>) {
    return super.check(m) && !this.order(m as Model).purged;
  }
  constructor(
    pick: number,
    readonly sameBody: boolean,
  ) {
    super(pick);
  }
  async act(m: Model, r: Real) {
    const o = this.order(m);
    const body = this.sameBody ? o.body : { ...o.body, customerId: `${r.tag}-other` };
    const res = await r.world.http.send('POST', '/orders', body, { 'idempotency-key': o.key });
    if (this.sameBody) {
      if (res.status !== 201 || res.body.id !== o.id) fail(`repeated create of ${o.id}`, res);
    } else if (res.status !== 422 || res.body.code !== 'IDEMPOTENCY_KEY_REUSED') fail(`create reusing the key of ${o.id}`, res);
  }
  toString() {
    return `RepeatCreate(${this.pick}, ${this.sameBody ? 'same' : 'other'} body)`;
  }
}

/** An order retention deleted is answered 404 from then on. */
function gone(o: Order, what: string, res: Reply): boolean {
  if (!o.purged) return false;
  if (res.status !== 404 || res.body.code !== 'ORDER_NOT_FOUND') fail(`${what} ${o.id} after retention deleted it`, res);
  return true;
}

function applyPay(o: Order, res: Reply): void {
  if (gone(o, 'pay', res)) return;
  if (res.status === 200) {
    if (res.body.status !== 'PAID') fail(`pay ${o.id}`, res);
    if (o.cancelled) fail(`pay ${o.id} after a cancel was answered 200`, res);
    // Paying a paid order again is answered like the first time, whenever it comes.
    if (!o.paid && res.firstSentAt > o.expiresAt + EPS_MS) fail(`pay ${o.id} sent ${res.firstSentAt - o.expiresAt} ms after its deadline`, res);
    o.paid = true;
    return;
  }
  if (o.paid) fail(`pay ${o.id} after a 200 pay`, res);
  if (res.status === 409 && res.body.code === 'ORDER_EXPIRED') {
    if (res.receivedAt < o.expiresAt - EPS_MS) fail(`pay ${o.id}: expired ${o.expiresAt - res.receivedAt} ms before its deadline`, res);
    return;
  }
  if (res.status === 409 && res.body.code === 'ORDER_NOT_PAYABLE') {
    if (!o.cancelled && res.receivedAt < o.expiresAt - EPS_MS) fail(`pay ${o.id}: cancelled before its deadline without a cancel`, res);
    return;
  }
  fail(`pay ${o.id}`, res);
}

function applyCancel(o: Order, res: Reply): void {
  if (gone(o, 'cancel', res)) return;
  if (res.status === 200) {
    if (res.body.status !== 'CANCELLED') fail(`cancel ${o.id}`, res);
    if (o.paid) fail(`cancel ${o.id} after a 200 pay`, res);
    o.cancelled = true;
    return;
  }
  if (res.status === 409 && res.body.code === 'ORDER_NOT_CANCELLABLE') {
    if (!o.paid) o.paid = true; // settled by the pay it raced (its 200 is checked with it)
    return;
  }
  fail(`cancel ${o.id}`, res);
}

class Pay extends OnOrder {
  async act(m: Model, r: Real) {
    const o = this.order(m);
    applyPay(o, await r.world.http.send('POST', `/orders/${o.id}/pay`, { paymentRef: 'ref' }));
  }
  toString() {
    return `Pay(${this.pick})`;
  }
}

class Cancel extends OnOrder {
  async act(m: Model, r: Real) {
    const o = this.order(m);
    applyCancel(o, await r.world.http.send('POST', `/orders/${o.id}/cancel`));
  }
  toString() {
    return `Cancel(${this.pick})`;
  }
}

/** Pay and cancel sent together: exactly one may win. */
class PayAndCancel extends OnOrder {
  async act(m: Model, r: Real) {
    const o = this.order(m);
    const [pay, cancel] = await Promise.all([
      r.world.http.send('POST', `/orders/${o.id}/pay`, { paymentRef: 'race' }),
      r.world.http.send('POST', `/orders/${o.id}/cancel`),
    ]);
    if (pay.status === 200 && cancel.status === 200) throw new Error(`pay and cancel of ${o.id} both answered 200`);
    // Apply the winner first: the loser's answer is judged against it.
    if (pay.status === 200) {
      applyPay(o, pay);
      applyCancel(o, cancel);
    } else {
      applyCancel(o, cancel);
      applyPay(o, pay);
    }
  }
  toString() {
    return `PayAndCancel(${this.pick})`;
  }
}

class Read extends OnOrder {
  async act(m: Model, r: Real) {
    const o = this.order(m);
    const res = await r.world.http.send('GET', `/orders/${o.id}`);
    if (gone(o, 'get', res)) return;
    if (res.status !== 200) fail(`get ${o.id}`, res);
    if (o.paid && res.body.status !== 'PAID') fail(`get ${o.id}: paid, then`, res);
    if (o.cancelled && res.body.status !== 'CANCELLED') fail(`get ${o.id}: cancelled, then`, res);
  }
  toString() {
    return `Read(${this.pick})`;
  }
}

/** Tries a database read a few times: a fault step may just have cut the test's own connections. */
async function read<T>(f: () => Promise<T>): Promise<T> {
  for (let i = 0; ; i++) {
    try {
      return await f();
    } catch (err) {
      if (i >= 5) throw err;
      await new Promise((res) => setTimeout(res, 300));
    }
  }
}

const FINAL_NOTICE = new Set(['SENT', 'FAILED', 'CANCELLED']);

/** The retention pass with a cutoff of now: every settled order whose notice is settled may go, while expiries and deliveries run. */
class Retention extends Step<Model> {
  async act(m: Model, r: Real) {
    const live = m.orders.filter((o) => !o.purged);
    const ids = live.map((o) => o.id);
    const db = r.world.db;
    const [rows, notes] = await read(() =>
      Promise.all([db.order.findMany({ where: { id: { in: ids } } }), db.notification.findMany({ where: { orderId: { in: ids } } })]),
    );
    // A failed pass (the database cut off by a fault) may still have committed: what is gone says.
    const repo = createOrdersRepository(db);
    await runRetention({ olderThanSeconds: 0, batchSize: 1_000, purges: repo.retention }, 60_000).catch((err: unknown) => {
      if (!isDatabaseUnavailable(err) && !isSerializationFailure(err)) throw err;
    });
    const left = new Set((await read(() => db.order.findMany({ where: { id: { in: ids } }, select: { id: true } }))).map((x) => x.id));
    for (const o of live) {
      if (left.has(o.id)) continue;
      const row = rows.find((x) => x.id === o.id);
      const mine = notes.filter((n) => n.orderId === o.id);
      const final = row && row.status !== 'UNPAID' && mine.every((n) => FINAL_NOTICE.has(n.status) && !n.redriveRequested);
      o.purged = final ? { row, notes: mine } : 'unknown';
    }
  }
  toString() {
    return 'Retention';
  }
}

const operations: fc.Arbitrary<Step<Model>> = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom<1 | 2>(1, 2).map((t) => new Create(t)) },
  { weight: 1, arbitrary: fc.tuple(fc.constantFrom<1 | 2>(1, 2), fc.integer({ min: 2, max: 12 })).map(([t, n]) => new CreateBurst(t, n)) },
  { weight: 1, arbitrary: fc.tuple(fc.nat(), fc.boolean()).map(([i, same]) => new RepeatCreate(i, same)) },
  { weight: 3, arbitrary: fc.nat().map((i) => new Pay(i)) },
  { weight: 2, arbitrary: fc.nat().map((i) => new Cancel(i)) },
  { weight: 2, arbitrary: fc.nat().map((i) => new PayAndCancel(i)) },
  { weight: 1, arbitrary: fc.nat().map((i) => new Read(i)) },
  { weight: 1, arbitrary: fc.constant(new Retention()) },
);

async function settleAndCheck(m: Model, r: Real): Promise<Record<string, number>> {
  const ids = m.orders.map((o) => o.id);
  const db = r.world.db;
  const calm = await settled(async () => {
    const open = await db.order.count({ where: { id: { in: ids }, status: 'UNPAID' } });
    const unsent = await db.notification.count({ where: { orderId: { in: ids }, status: { not: 'SENT' } } });
    return open + unsent === 0;
  }, SETTLE_MS);
  const rows = await db.order.findMany({ where: { id: { in: ids } } });
  const notes = await db.notification.findMany({ where: { orderId: { in: ids } } });
  const p = problems();
  if (!calm) p.add(`not settled within ${SETTLE_MS} ms`);
  const delivered = new Map<string, number>();
  for (const c of r.world.webhook.delivered) delivered.set(c.body.id, (delivered.get(c.body.id) ?? 0) + 1);
  const counts = { orders: ids.length, paid: 0, cancelledByTimeout: 0, cancelledByCustomer: 0, delivered: 0, deliveredTwice: 0, purged: 0 };
  for (const o of m.orders) {
    if (o.purged) {
      counts.purged++;
      // Whatever was seen of it: the receiver took its one notice, or none for a paid order.
      const taken = r.world.webhook.delivered.filter((c) => (c.body as { payload?: { orderId?: string } }).payload?.orderId === o.id);
      const notices = new Set(taken.map((c) => c.body.id));
      if (o.paid ? notices.size !== 0 : notices.size !== 1) p.add(`order ${o.id}: deleted by retention, ${notices.size} notices taken by the receiver`);
      if (o.purged === 'unknown') continue;
    }
    const seen = o.purged as Seen | undefined; // not 'unknown': that went on above
    const row = seen ? seen.row : rows.find((x) => x.id === o.id);
    const mine = seen ? seen.notes : notes.filter((n) => n.orderId === o.id);
    if (!row) {
      p.add(`order ${o.id} is gone`);
      continue;
    }
    if (o.paid) {
      counts.paid++;
      if (row.status !== 'PAID') p.add(`order ${o.id}: pay answered 200, now ${row.status}`);
      if (row.paidAt && row.paidAt.getTime() >= o.expiresAt) p.add(`order ${o.id}: paid ${row.paidAt.getTime() - o.expiresAt} ms after its deadline`);
      if (mine.length) p.add(`order ${o.id}: paid, yet ${mine.length} cancellation notice(s)`);
      continue;
    }
    if (row.status !== 'CANCELLED') {
      p.add(`order ${o.id}: never paid, now ${row.status}`);
      continue;
    }
    if (row.cancelReason === 'CUSTOMER') {
      counts.cancelledByCustomer++;
      if (!o.cancelled) p.add(`order ${o.id}: cancelled for the customer, but no cancel was answered 200`);
    } else {
      counts.cancelledByTimeout++;
      const early = o.expiresAt - (row.cancelledAt?.getTime() ?? 0);
      if (early > 0) p.add(`order ${o.id}: cancelled for timeout ${early} ms before its deadline`);
    }
    if (mine.length !== 1) {
      p.add(`order ${o.id}: ${mine.length} cancellation notices`);
      continue;
    }
    const n = mine[0]!;
    const got = delivered.get(n.id) ?? 0;
    if (n.status !== 'SENT' || got === 0) p.add(`order ${o.id}: notice ${n.id} is ${n.status}, the receiver took it ${got} times`);
    if (got > 0) counts.delivered++;
    if (got > 1) {
      counts.deliveredTwice++;
      if (!repeatExplained(r, n)) p.add(`order ${o.id}: notice ${n.id} taken ${got} times without a fault that could cut a send off`);
    }
  }
  p.throwIfAny(() => `run ${r.tag} (logs: ${r.world.saveLogs(r.tag)})`);
  return counts;
}

describe('orders, model-based', () => {
  it('keeps the rules under random operations, time steps and faults', async () => {
    const summary = await runSuite<Model>({
      name: 'orders',
      world: () => world,
      operations,
      newModel: () => ({ orders: [] }),
      settleAndCheck,
      runs: 8,
      maxCommands: 40,
    });
    expect(summary.runs).toBeGreaterThan(0);
  });
});
