// The orders model suite's operator steps: an order's expiry job made due at
// once (as a clock step on Redis's host or an operator's run-now would), and
// cancelled outright (Redis losing it: the reconciliation pass owes the expiry).
import { expireJobId } from '../../../src/modules/orders/orders.service.js';
import { ORDERS_QUEUE } from '../../../src/modules/orders/orders.module.js';
import { type Real, admin } from '../runner.js';
import { OnOrder } from './create.steps.js';
import { type Model, fail } from './model.js';

const job = (id: string) => `${ORDERS_QUEUE}/jobs/${encodeURIComponent(expireJobId(id))}`;

/** Runs an order's expiry job now, before its deadline most often: the expiry must find it not due and leave it UNPAID. */
export class RunExpiryNow extends OnOrder {
  async act(m: Model, r: Real) {
    const o = this.order(m);
    const res = await admin(r, 'POST', `${job(o.id)}/run-now`);
    // 404: the job is done (the order settled), or a fault lost it (the pass puts it back).
    if (res.status !== 200 && res.status !== 404) fail(`run-now of ${o.id}'s expiry`, res);
  }
  toString() {
    return `RunExpiryNow(${this.pick})`;
  }
}

/** Cancels an order's expiry job: the order still expires on time, by the reconciliation pass. */
export class CancelExpiryJob extends OnOrder {
  async act(m: Model, r: Real) {
    const o = this.order(m);
    const res = await admin(r, 'DELETE', job(o.id));
    if (res.status !== 200 && res.status !== 404) fail(`cancel of ${o.id}'s expiry job`, res);
  }
  toString() {
    return `CancelExpiryJob(${this.pick})`;
  }
}
