// The orders model suite's deadline steps: a client's move of an order's
// deadline (later by seconds, or to a time, earlier or later), raced with a
// pay; an order made with a long window and moved much earlier at once (its
// expiry must come at the new deadline, not the old); an operator's
// extension of the orders expiring soon; and a pay while the order's payment
// reminder waits to be delivered (the receiver failing it a moment), which
// must withdraw it. Each answer is judged against the model (applyMove).
import type { Reply } from '../../chaos/drivers/http.js';
import { sleep } from '../../helpers/redis.js';
import { type Real, Step, dbRead } from '../runner.js';
import { MODEL_ADMIN_TOKEN, type ModelClient } from '../world.js';
import { OnOrder, create, orderBody } from './create.steps.js';
import { EPS_MS, type Model, ON_TIME_MS, type Order, fail, faultNear, gone } from './model.js';
import { applyCancel, applyPay } from './pay-cancel.steps.js';

/** A move's body: later by seconds, to a time this many ms from now, or to an instant (ms since epoch). */
export type MoveTo = { extendBySeconds: number } | { inMs: number } | { at: number };

const bodyOf = (to: MoveTo) =>
  'inMs' in to ? { expiresAt: new Date(Date.now() + to.inMs).toISOString() } : 'at' in to ? { expiresAt: new Date(to.at).toISOString() } : to;
let moves = 0;

/** Sends a move of `o` (under its own Idempotency-Key, so a retry after a killed API moves once) and judges the answer. */
export async function sendMove(o: Order, r: Real, to: MoveTo): Promise<Reply> {
  const body = bodyOf(to);
  const res = await r.world.httpAs(o.client).send('PATCH', `/orders/${o.id}`, body, { 'idempotency-key': `${r.tag}-mv${moves++}` });
  applyMove(o, res, body);
  return res;
}

/** A move's answer against the model: 200 only for an order open and inside its window, the new deadline as asked. */
export function applyMove(o: Order, res: Reply, body: { expiresAt: string } | { extendBySeconds: number }): void {
  if (gone(o, 'move', res)) return;
  if (res.status === 200) {
    if (o.paid || o.cancelled) fail(`move ${o.id} after a ${o.paid ? 'pay' : 'cancel'} was answered 200`, res);
    if (res.firstSentAt > o.expiresAt + EPS_MS) fail(`move ${o.id} sent ${res.firstSentAt - o.expiresAt} ms after its deadline`, res);
    const at = Date.parse(String(res.body.expiresAt));
    const asked = 'expiresAt' in body ? Date.parse(body.expiresAt) : o.expiresAt + body.extendBySeconds * 1_000;
    if (at !== asked) fail(`move ${o.id}: deadline ${at}, asked ${asked}`, res);
    o.expiresAt = at;
    o.deadlines.push(at);
    return;
  }
  const code = String(res.body.code);
  if (res.status === 409 && code === 'ORDER_EXPIRED') {
    if (res.receivedAt < o.expiresAt - EPS_MS) fail(`move ${o.id}: expired ${o.expiresAt - res.receivedAt} ms before its deadline`, res);
    return;
  }
  if (res.status === 409 && code === 'ORDER_NOT_MOVABLE') {
    // Paid or cancelled: by this client, or by its timeout once past the deadline.
    if (!o.paid && !o.cancelled && res.receivedAt < o.expiresAt - EPS_MS) fail(`move ${o.id}: settled before its deadline without a pay or cancel`, res);
    return;
  }
  if (res.status === 422 && code === 'EXPIRES_AT_IN_PAST' && 'expiresAt' in body && Date.parse(body.expiresAt) <= res.receivedAt + EPS_MS) return;
  fail(`move ${o.id}`, res);
}

/** Moves one of the run's orders (most often an open one): later by seconds, or to a time, earlier or later than its deadline. */
export class MoveDeadline extends OnOrder {
  constructor(
    pick: number,
    readonly to: MoveTo,
  ) {
    super(pick);
  }
  async act(m: Model, r: Real) {
    await sendMove(this.order(m), r, this.to);
  }
  toString() {
    return `MoveDeadline(${this.pick}, ${JSON.stringify(this.to)})`;
  }
}

/** A move and a pay of one order sent together near its deadline: each answered as the order stood when it took it. */
export class MoveRacingPay extends OnOrder {
  constructor(
    pick: number,
    readonly leadMs: number,
  ) {
    super(pick);
  }
  protected override list(m: Readonly<Model>): Order[] {
    const open = m.orders.filter((o) => !o.paid && !o.cancelled && !o.purged && o.expiresAt > Date.now() + this.leadMs);
    return open.length ? open : m.orders;
  }
  async act(m: Model, r: Real) {
    const o = this.order(m);
    await new Promise((done) => setTimeout(done, Math.max(0, o.expiresAt - this.leadMs - Date.now())));
    const body = { extendBySeconds: 1 };
    const [move, pay] = await Promise.all([
      r.world.httpAs(o.client).send('PATCH', `/orders/${o.id}`, body, { 'idempotency-key': `${r.tag}-mv${moves++}` }),
      r.world.httpAs(o.client).send('POST', `/orders/${o.id}/pay`, { paymentRef: 'racing-move' }),
    ]);
    // Both 200: the move came first (a paid order does not move). Judge the earlier first.
    if (move.status === 200) {
      applyMove(o, move, body);
      applyPay(o, pay);
    } else {
      applyPay(o, pay);
      applyMove(o, move, body);
    }
  }
  toString() {
    return `MoveRacingPay(${this.pick}, ${this.leadMs} ms before the deadline)`;
  }
}

/**
 * An order made with a long window and moved much earlier at once: it must
 * expire at the new deadline (within the run's second), not the old. Judged
 * at the step (expectExpiredOnTime) and by the run's checks, which skip an
 * order a later step paid, cancelled or brought a fault near.
 */
export class CreateAndMoveEarlier extends Step<Model> {
  constructor(
    readonly inMs: number,
    readonly as: ModelClient,
  ) {
    super();
  }
  async act(m: Model, r: Real) {
    const o = await create(m, r, this.as, `${r.tag}-e${m.orders.length}`, orderBody(m, r, 4));
    const moved = await sendMove(o, r, { inMs: this.inMs });
    if (moved.status === 200) await expectExpiredOnTime(o, r, moved.firstSentAt);
  }
  toString() {
    return `CreateAndMoveEarlier(${this.inMs} ms, ${this.as})`;
  }
}

/**
 * Polls order `o`, just moved, until it is no longer UNPAID: cancelled by its
 * expiry within ON_TIME_MS of its new deadline by the row's own cancel time
 * (as the run's check judges, whatever a busy read adds), unless a fault came
 * near since the move (sent at `from`). Paid or cancelled by a customer: not
 * judged here.
 */
async function expectExpiredOnTime(o: Order, r: Real, from: number): Promise<void> {
  const until = o.expiresAt + ON_TIME_MS;
  const select = { status: true, cancelledAt: true, cancelReason: true } as const;
  for (;;) {
    const row = await dbRead(() => r.world.db.order.findUnique({ where: { id: o.id }, select }));
    if (row && row.status !== 'UNPAID') {
      const late = row.cancelReason === 'PAYMENT_TIMEOUT' && row.cancelledAt ? row.cancelledAt.getTime() - o.expiresAt : null;
      if (late === null || late <= ON_TIME_MS || faultNear(r, from, until)) return;
      throw new Error(`order ${o.id}: moved to ${o.expiresAt}, cancelled ${late} ms after it, without a fault`);
    }
    if (Date.now() > until + 2_000) break;
    await sleep(50);
  }
  if (!faultNear(r, from, Date.now()))
    throw new Error(`order ${o.id}: moved to ${o.expiresAt}, still UNPAID ${Date.now() - o.expiresAt} ms after it, without a fault`);
}

/** An operator gives `bySeconds` back to every order expiring within the next `withinMs` (or past its deadline by up to 300 ms). */
export class AdminExtend extends Step<Model> {
  constructor(
    readonly withinMs: number,
    readonly bySeconds: number,
  ) {
    super();
  }
  async act(m: Model, r: Real) {
    const from = Date.now() - 300;
    const to = Date.now() + this.withinMs;
    const body = { expiringFrom: new Date(from).toISOString(), expiringTo: new Date(to).toISOString(), extendBySeconds: this.bySeconds };
    const res = await r.world.http.send('POST', '/admin/orders/extend', body, { authorization: `Bearer ${MODEL_ADMIN_TOKEN}` });
    if (res.status !== 200 || typeof res.body.extended !== 'number') fail('extend', res);
    // Which were extended: their deadline now is theirs plus the seconds (no other step runs meanwhile);
    // twice or more only when the request was sent again (a 503 or a lost answer: the extension is not idempotent).
    const live = m.orders.filter((o) => !o.purged);
    const rows = await r.world.db.order.findMany({ where: { id: { in: live.map((o) => o.id) } }, select: { id: true, expiresAt: true } });
    let seen = 0;
    for (const row of rows) {
      const o = live.find((x) => x.id === row.id)!;
      const at = row.expiresAt.getTime();
      if (at === o.expiresAt) continue;
      const times = (at - o.expiresAt) / (this.bySeconds * 1_000);
      if (!Number.isInteger(times) || times < 1 || (times > 1 && res.attempts === 1))
        throw new Error(`extend: order ${o.id} moved from ${o.expiresAt} to ${at}, not by ${this.bySeconds} s`);
      if (o.paid || o.cancelled) throw new Error(`extend: order ${o.id} was ${o.paid ? 'paid' : 'cancelled'} (answered 200), yet extended`);
      if (o.expiresAt < from || o.expiresAt >= to) throw new Error(`extend: order ${o.id}, deadline ${o.expiresAt}, outside [${from}, ${to})`);
      for (let k = 1; k <= times; k++) o.deadlines.push(o.expiresAt + k * this.bySeconds * 1_000);
      o.expiresAt = at;
      seen++;
    }
    if (res.attempts === 1 && seen !== res.body.extended) fail(`extend answered ${String(res.body.extended)}, ${seen} of the run's orders moved`, res);
  }
  toString() {
    return `AdminExtend(${this.withinMs} ms, +${this.bySeconds} s)`;
  }
}

/**
 * An order with a payment reminder, paid or cancelled by its customer at once,
 * well before the reminder's time, then moved (refused: settled): its
 * reminder job still fires then, and must write nothing (the run's checks:
 * no reminder written after the order was settled).
 */
export class SettleBeforeReminder extends Step<Model> {
  constructor(
    readonly as: ModelClient,
    readonly how: 'pay' | 'cancel',
  ) {
    super();
  }
  async act(m: Model, r: Real) {
    const o = await create(m, r, this.as, `${r.tag}-s${m.orders.length}`, orderBody(m, r, 2));
    if (this.how === 'pay') applyPay(o, await r.world.httpAs(o.client).send('POST', `/orders/${o.id}/pay`, { paymentRef: 'early' }));
    else applyCancel(o, await r.world.httpAs(o.client).send('POST', `/orders/${o.id}/cancel`));
    // Settled inside its window: its deadline no longer moves (409), though it has not passed.
    await sendMove(o, r, { extendBySeconds: 1 });
  }
  toString() {
    return `SettleBeforeReminder(${this.as}, ${this.how})`;
  }
}

/**
 * An order reminded a second before its deadline, its reminder's first call
 * failed by the receiver, then paid while the reminder waits for its retry:
 * the pay must withdraw it (never delivered after the pay: the run's checks).
 */
export class PayWhileReminderWaits extends Step<Model> {
  constructor(readonly as: ModelClient) {
    super();
  }
  async act(m: Model, r: Real) {
    const o = await create(m, r, this.as, `${r.tag}-w${m.orders.length}`, orderBody(m, r, 2));
    await new Promise((done) => setTimeout(done, Math.max(0, o.expiresAt - 1_000 - 150 - Date.now())));
    r.world.receiver('fail');
    const called = () =>
      r.world.webhook.calls.some((c) => c.body.kind === 'ORDER_PAYMENT_REMINDER' && (c.body as { payload?: { orderId?: string } }).payload?.orderId === o.id);
    for (const end = Date.now() + 700; !called() && Date.now() < end;) await new Promise((done) => setTimeout(done, 10));
    try {
      applyPay(o, await r.world.httpAs(o.client).send('POST', `/orders/${o.id}/pay`, { paymentRef: 'reminded' }));
      // Still failing a while: a reminder the pay failed to withdraw would be retried and taken only well after it.
      await new Promise((done) => setTimeout(done, 800));
    } finally {
      r.world.receiver('ok');
    }
  }
  toString() {
    return `PayWhileReminderWaits(${this.as})`;
  }
}
