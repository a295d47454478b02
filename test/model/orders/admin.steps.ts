// The orders model suite's operator steps: an order's expiry job made due at
// once (as a clock step on Redis's host or an operator's run-now would), and
// cancelled outright (Redis losing it: the reconciliation pass owes the expiry),
// then the order paid and moved past its deadline before that pass.
import { expireJobId } from '../../../src/modules/orders/orders.service.js';
import { ORDERS_QUEUE } from '../../../src/modules/orders/orders.module.js';
import { RECONCILE_JOB_ID } from '../../../src/modules/orders/orders.reconcile.js';
import { sleep } from '../../helpers/redis.js';
import { type Real, admin } from '../runner.js';
import { MODEL_TIMINGS } from '../world.js';
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
 * How long past the deadline the pay and the move after a cancelled expiry
 * job are sent: past the clocks' tolerance, and early enough for both to be
 * answered before the next reconciliation pass (half a period after the
 * deadline: lateDeadline) gives the order its expiry job back.
 */
const PAY_LATE_MS = { min: 150, max: 300 };

const PASS_JOB = `${ORDERS_QUEUE}/jobs/${encodeURIComponent(RECONCILE_JOB_ID)}`;
/** The reconciliation passes' period: each gives every UNPAID order whose expiry job is missing its job back, due at its deadline. */
const PASS_MS = MODEL_TIMINGS.RECONCILE_SECONDS * 1_000;

/**
 * A deadline halfway between two reconciliation passes, at least `leadMs`
 * from now, by the pass's next due time (read again while a pass runs); null
 * when that cannot be read within half a period (a fault).
 */
async function betweenPasses(r: Real, leadMs: number): Promise<number | null> {
  for (const end = Date.now() + PASS_MS / 2; Date.now() < end; await sleep(25)) {
    const res = await admin(r, 'GET', PASS_JOB);
    if (res.status !== 200 || res.body.state !== 'pending' || typeof res.body.dueAt !== 'string') continue;
    let at = Date.parse(res.body.dueAt) + PASS_MS / 2;
    while (at < Date.now() + leadMs) at += PASS_MS;
    return at;
  }
  return null;
}

/**
 * Moves open order `o` to a deadline halfway between two reconciliation
 * passes and returns when its expiry job may be cancelled: after the pass
 * before it (which would give the job back), before the deadline. Else (the
 * pass unknown, the move refused) now, as it stands.
 */
async function lateDeadline(o: Order, r: Real): Promise<number> {
  if (o.paid || o.cancelled || o.purged || o.expiresAt <= Date.now()) return Date.now();
  const at = await betweenPasses(r, 600);
  if (at === null || (await sendMove(o, r, { at })).status !== 200) return Date.now();
  return at - PASS_MS * 0.3;
}

/**
 * Cancels an order's expiry job: the order still expires, by the
 * reconciliation pass. With `payLateMs`, the order's deadline is first moved
 * halfway between two passes and its job cancelled after the first of them
 * (lateDeadline); the customer then pays and moves its deadline later, that
 * long after the deadline (`first`: which of the two goes first), while the
 * order is still UNPAID (its job gone, the next pass not yet come): only the
 * pay's and the move's own deadline guards can refuse them. Both, because
 * this is the one moment either guard is judged.
 */
export class CancelExpiryJob extends OnOrder {
  constructor(
    pick: number,
    readonly payLateMs: number | null = null,
    readonly first: 'pay' | 'move' = 'pay',
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
    if (this.payLateMs !== null) await sleep(Math.max(0, (await lateDeadline(o, r)) - Date.now()));
    const res = await admin(r, 'DELETE', job(o.id));
    if (res.status !== 200 && res.status !== 404) fail(`cancel of ${o.id}'s expiry job`, res);
    if (res.status === 200) o.expiry = { ...o.expiry, jobCancelled: true };
    if (this.payLateMs === null || res.status !== 200 || o.paid || o.cancelled || o.purged) return;
    const late = Math.min(Math.max(this.payLateMs, PAY_LATE_MS.min), PAY_LATE_MS.max);
    await sleep(Math.max(0, o.expiresAt + late - Date.now()));
    const pay = async () => applyPay(o, await r.world.httpAs(o.client).send('POST', `/orders/${o.id}/pay`, { paymentRef: 'late' }));
    const move = async () => void (await sendMove(o, r, { extendBySeconds: 1 }));
    for (const send of this.first === 'move' ? [move, pay] : [pay, move]) await send();
  }
  toString() {
    const late = this.first === 'move' ? 'move and pay' : 'pay and move';
    return `CancelExpiryJob(${this.pick}${this.payLateMs === null ? '' : `, ${late} ${this.payLateMs} ms after the deadline`})`;
  }
}
