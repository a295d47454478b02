// The orders model suite's cross-client steps: the client that does not own
// an order pays it, cancels it, reads it, races the owner's pay with a cancel
// of its own, and creates under the same Idempotency-Key value. Each foreign
// request is answered at once as for an id no order has, and the model is
// left as it was: what the owner's steps and the settled check see after
// holds that nothing changed.
import type { Real } from '../runner.js';
import { OnOrder, create } from './create.steps.js';
import { type Model, type Order, notFound, otherClient } from './model.js';
import { applyPay } from './pay-cancel.steps.js';

/**
 * How many of the latest orders a `recent` step picks from: those most
 * likely still UNPAID and in their window, the only ones a missing client
 * condition in the pay or cancel guard would change.
 */
const RECENT = 3;

/** Acts on one of the run's orders, or (`recent`) one of its latest. */
abstract class OnSomeOrder extends OnOrder {
  constructor(
    pick: number,
    readonly recent: boolean,
  ) {
    super(pick);
  }
  protected override list(m: Readonly<Model>): Order[] {
    return this.recent ? m.orders.slice(-RECENT) : m.orders;
  }
  protected label(name: string) {
    return `${name}(${this.pick}${this.recent ? ', recent' : ''})`;
  }
}

const foreignPay = (o: Order, r: Real) => {
  const http = r.world.httpAs(otherClient(o.client));
  o.foreign.pay++;
  return notFound(o, r, 'pay', (id) => http.send('POST', `/orders/${id}/pay`, { paymentRef: 'foreign' }));
};

const foreignCancel = (o: Order, r: Real) => {
  const http = r.world.httpAs(otherClient(o.client));
  o.foreign.cancel++;
  return notFound(o, r, 'cancel', (id) => http.send('POST', `/orders/${id}/cancel`));
};

export class ForeignPay extends OnSomeOrder {
  async act(m: Model, r: Real) {
    await foreignPay(this.order(m), r);
  }
  toString() {
    return this.label('ForeignPay');
  }
}

export class ForeignCancel extends OnSomeOrder {
  async act(m: Model, r: Real) {
    await foreignCancel(this.order(m), r);
  }
  toString() {
    return this.label('ForeignCancel');
  }
}

export class ForeignRead extends OnSomeOrder {
  async act(m: Model, r: Real) {
    const o = this.order(m);
    const http = r.world.httpAs(otherClient(o.client));
    await notFound(o, r, 'get', (id) => http.send('GET', `/orders/${id}`));
  }
  toString() {
    return this.label('ForeignRead');
  }
}

/** The owner's pay and the other client's cancel sent together: the pay is judged as if it came alone. */
export class PayAgainstForeignCancel extends OnSomeOrder {
  async act(m: Model, r: Real) {
    const o = this.order(m);
    const [pay] = await Promise.all([r.world.httpAs(o.client).send('POST', `/orders/${o.id}/pay`, { paymentRef: 'raced' }), foreignCancel(o, r)]);
    applyPay(o, pay);
  }
  toString() {
    return this.label('PayAgainstForeignCancel');
  }
}

/**
 * The other client creates under the Idempotency-Key value of an order: a
 * new order of its own (keys are its own), never a replay of the other's,
 * even with the same body.
 */
export class ForeignRepeatCreate extends OnOrder {
  // Only a key value the other client has not used: under one of its own it would replay its own order.
  protected override list(m: Readonly<Model>): Order[] {
    return m.orders.filter((o) => !m.orders.some((x) => x.key === o.key && x.client !== o.client));
  }
  async act(m: Model, r: Real) {
    const o = this.order(m);
    const mine = await create(m, r, otherClient(o.client), o.key, o.body);
    if (mine.id === o.id) throw new Error(`create by ${mine.client} under the Idempotency-Key of ${o.id} (of ${o.client}) replayed that order`);
  }
  toString() {
    return `ForeignRepeatCreate(${this.pick})`;
  }
}
