// The orders model suite's paying and cancelling steps, each by the order's
// own client: pay, cancel, and the two raced, each answer judged against the
// model (applyPay, applyCancel).
import type { Reply } from '../../chaos/drivers/http.js';
import type { Real } from '../runner.js';
import { OnOrder } from './create.steps.js';
import { EPS_MS, type Model, type Order, fail, gone } from './model.js';

export function applyPay(o: Order, res: Reply): void {
  o.tried.pay = true;
  if (gone(o, 'pay', res)) return;
  if (res.status === 200) {
    if (res.body.status !== 'PAID') fail(`pay ${o.id}`, res);
    if (o.cancelled) fail(`pay ${o.id} after a cancel was answered 200`, res);
    // Paying a paid order again is answered like the first time, whenever it comes.
    if (!o.paid && res.firstSentAt > o.expiresAt + EPS_MS) fail(`pay ${o.id} sent ${res.firstSentAt - o.expiresAt} ms after its deadline`, res);
    o.settledAnsweredAt ??= res.receivedAt;
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

export function applyCancel(o: Order, res: Reply): void {
  o.tried.cancel = true;
  if (gone(o, 'cancel', res)) return;
  if (res.status === 200) {
    if (res.body.status !== 'CANCELLED') fail(`cancel ${o.id}`, res);
    if (o.paid) fail(`cancel ${o.id} after a 200 pay`, res);
    o.settledAnsweredAt ??= res.receivedAt;
    o.cancelled = true;
    return;
  }
  if (res.status === 409 && res.body.code === 'ORDER_NOT_CANCELLABLE') {
    if (!o.paid) o.paid = true; // settled by the pay it raced (its 200 is checked with it)
    return;
  }
  fail(`cancel ${o.id}`, res);
}

export class Pay extends OnOrder {
  async act(m: Model, r: Real) {
    const o = this.order(m);
    applyPay(o, await r.world.httpAs(o.client).send('POST', `/orders/${o.id}/pay`, { paymentRef: 'ref' }));
  }
  toString() {
    return `Pay(${this.pick})`;
  }
}

export class Cancel extends OnOrder {
  async act(m: Model, r: Real) {
    const o = this.order(m);
    applyCancel(o, await r.world.httpAs(o.client).send('POST', `/orders/${o.id}/cancel`));
  }
  toString() {
    return `Cancel(${this.pick})`;
  }
}

/** Two pays sent together: both answered as one (a pay of a paid order is answered as the first was). */
export class PayTwice extends OnOrder {
  async act(m: Model, r: Real) {
    const o = this.order(m);
    const answers = await Promise.all([0, 1].map(() => r.world.httpAs(o.client).send('POST', `/orders/${o.id}/pay`, { paymentRef: 'twice' })));
    // The winner first: the other's answer is judged against it.
    for (const res of answers.sort((a, b) => Number(b.status === 200) - Number(a.status === 200))) applyPay(o, res);
  }
  toString() {
    return `PayTwice(${this.pick})`;
  }
}

/** Pay and cancel sent together: exactly one may win. */
export class PayAndCancel extends OnOrder {
  async act(m: Model, r: Real) {
    const o = this.order(m);
    const [pay, cancel] = await Promise.all([
      r.world.httpAs(o.client).send('POST', `/orders/${o.id}/pay`, { paymentRef: 'race' }),
      r.world.httpAs(o.client).send('POST', `/orders/${o.id}/cancel`),
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
