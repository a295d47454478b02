// The orders model suite's reading step: an order read back by its client and
// held to what the model knows of it.
import type { Real } from '../runner.js';
import { OnOrder } from './create.steps.js';
import { type Model, fail, gone } from './model.js';

export class Read extends OnOrder {
  async act(m: Model, r: Real) {
    const o = this.order(m);
    const res = await r.world.httpAs(o.client).send('GET', `/orders/${o.id}`);
    if (gone(o, 'get', res)) return;
    if (res.status !== 200) fail(`get ${o.id}`, res);
    if (o.paid && res.body.status !== 'PAID') fail(`get ${o.id}: paid, then`, res);
    if (o.cancelled && res.body.status !== 'CANCELLED') fail(`get ${o.id}: cancelled, then`, res);
    // Only the other client's requests could have done these (each answered 404).
    if (!o.tried.pay && res.body.status === 'PAID') fail(`get ${o.id}: PAID, yet its client sent no pay`, res);
    if (!o.tried.cancel && res.body.cancelReason === 'CUSTOMER') fail(`get ${o.id}: cancelled for the customer, yet its client sent no cancel`, res);
  }
  toString() {
    return `Read(${this.pick})`;
  }
}
