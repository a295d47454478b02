// The orders model suite's operator steps: an order's expiry job made due at
// once (as a clock step on Redis's host or an operator's run-now would), and
// cancelled outright (Redis losing it: the reconciliation pass owes the expiry).
import { expireJobId } from '../../../src/modules/orders/orders.service.js';
import { ORDERS_QUEUE } from '../../../src/modules/orders/orders.module.js';
import { type Real, admin } from '../runner.js';
import { OnOrder } from './create.steps.js';
import { type Model, type Order, fail } from './model.js';
import { sendMove } from './deadline.steps.js';
import { applyPay } from './pay-cancel.steps.js';

const job = (id: string) => `${ORDERS_QUEUE}/jobs/${encodeURIComponent(expireJobId(id))}`;

/** Makes order `o`'s expiry job due now (before its deadline: noted in the model, which then expects it back at the deadline). */
export async function runExpiryNow(o: Order, r: Real): Promise<void> {
  const res = await admin(r, 'POST', `${job(o.id)}/run-now`);
  // 404: the job is done (the order settled), or a fault lost it (the pass puts it back).
  if (res.status !== 200 && res.status !== 404) fail(`run-now of ${o.id}'s expiry`, res);
  if (res.status === 200 && res.firstSentAt < o.expiresAt) o.expiry = { ...o.expiry, ranEarlyAt: res.firstSentAt };
}

/** Runs an order's expiry job now, before its deadline most often: the expiry must find it not due and leave it UNPAID. */
export class RunExpiryNow extends OnOrder {
  async act(m: Model, r: Real) {
    const o = this.order(m);
    await runExpiryNow(o, r);
  }
  toString() {
    return `RunExpiryNow(${this.pick})`;
  }
}

/**
 * How long past the deadline the pay after a cancelled expiry job is sent:
 * past the clocks' tolerance, and before the reconciliation pass (which takes
 * the order a second past its deadline) can have cancelled it.
 */
const PAY_LATE_MS = { min: 200, max: 700 };

/**
 * Cancels an order's expiry job: the order still expires, by the
 * reconciliation pass. With `payLateMs`, the customer then pays (or moves its
 * deadline later: `then`) that long after the deadline, while the order is
 * still UNPAID (its job gone, the pass not yet come): only the pay's (the
 * move's) own deadline guard can refuse it.
 */
export class CancelExpiryJob extends OnOrder {
  constructor(
    pick: number,
    readonly payLateMs: number | null = null,
    readonly then: 'pay' | 'move' = 'pay',
  ) {
    super(pick);
  }
  // Paying late: an order still in its window (one past it has been cancelled already, or will be at once).
  protected override list(m: Readonly<Model>): Order[] {
    const open = m.orders.filter((o) => !o.paid && !o.cancelled && !o.purged && o.expiresAt > Date.now());
    return this.payLateMs !== null && open.length ? open : m.orders;
  }
  async act(m: Model, r: Real) {
    const o = this.order(m);
    const res = await admin(r, 'DELETE', job(o.id));
    if (res.status !== 200 && res.status !== 404) fail(`cancel of ${o.id}'s expiry job`, res);
    if (res.status === 200) o.expiry = { ...o.expiry, jobCancelled: true };
    if (this.payLateMs === null || res.status !== 200 || o.paid || o.cancelled || o.purged) return;
    const late = Math.min(Math.max(this.payLateMs, PAY_LATE_MS.min), PAY_LATE_MS.max);
    await new Promise((done) => setTimeout(done, Math.max(0, o.expiresAt + late - Date.now())));
    if (this.then === 'move') await sendMove(o, r, { extendBySeconds: 1 });
    else applyPay(o, await r.world.httpAs(o.client).send('POST', `/orders/${o.id}/pay`, { paymentRef: 'late' }));
  }
  toString() {
    return `CancelExpiryJob(${this.pick}${this.payLateMs === null ? '' : `, ${this.then} ${this.payLateMs} ms after the deadline`})`;
  }
}
