// The orders model suite's creating steps, each as one of the clients: orders
// created one by one, in bursts sharing a window, and created again under
// their Idempotency-Key; OnOrder, the base of the steps that act on an order
// already made.
import { OnPick, type Real, Step } from '../runner.js';
import type { ModelClient } from '../world.js';
import { type Model, type Order, fail } from './model.js';

/** A new order of `client`, as the model first knows it. */
export function newOrder(client: ModelClient, id: string, key: string, body: Record<string, unknown>, expiresAt: number): Order {
  const lead =
    typeof body.paymentReminderBeforeSeconds === 'number' && body.paymentReminderBeforeSeconds > 0 ? body.paymentReminderBeforeSeconds * 1_000 : null;
  return {
    id,
    client,
    key,
    body,
    expiresAt,
    createdAt: expiresAt - Number(body.paymentTimeoutSeconds) * 1_000,
    deadlines: [expiresAt],
    leadMs: lead,
    paid: false,
    cancelled: false,
    tried: { pay: false, cancel: false },
    foreign: { pay: 0, cancel: 0 },
  };
}

/** A create's body: a 1 s window without a payment reminder, a 2 s (or longer) one reminded a second before its deadline. */
export const orderBody = (m: Model, r: Real, timeoutSeconds: number) => ({
  customerId: r.tag,
  items: [{ sku: 'SKU', quantity: 1 + m.orders.length, unitPriceCents: 100 }],
  paymentTimeoutSeconds: timeoutSeconds,
  ...(timeoutSeconds > 1 && { paymentReminderBeforeSeconds: 1 }),
});

/** Creates an order as `client` under `key`: a new one, with the window asked for; returns it, in the model. */
export async function create(m: Model, r: Real, client: ModelClient, key: string, body: Record<string, unknown>): Promise<Order> {
  const res = await r.world.httpAs(client).send('POST', '/orders', body, { 'idempotency-key': key });
  if (res.status !== 201) fail(`create as ${client}`, res);
  const expiresAt = Date.parse(String(res.body.expiresAt));
  const createdAt = Date.parse(String(res.body.createdAt));
  if (expiresAt - createdAt !== Number(body.paymentTimeoutSeconds) * 1_000) fail(`create: window of ${String(body.paymentTimeoutSeconds)} s`, res);
  const o = newOrder(client, String(res.body.id), key, body, expiresAt);
  m.orders.push(o);
  return o;
}

/** Orders created together with one window: they expire together, and their expiry jobs go in batches. */
export class CreateBurst extends Step<Model> {
  constructor(
    readonly timeoutSeconds: 1 | 2,
    readonly n: number,
    readonly as: ModelClient,
  ) {
    super();
  }
  async act(m: Model, r: Real) {
    const base = m.orders.length;
    await Promise.all(Array.from({ length: this.n }, (_, k) => create(m, r, this.as, `${r.tag}-b${base}-${k}`, orderBody(m, r, this.timeoutSeconds))));
  }
  toString() {
    return `CreateBurst(${this.timeoutSeconds}s, ${this.n}, ${this.as})`;
  }
}

export class Create extends Step<Model> {
  constructor(
    readonly timeoutSeconds: 1 | 2,
    readonly as: ModelClient,
  ) {
    super();
  }
  async act(m: Model, r: Real) {
    await create(m, r, this.as, `${r.tag}-o${m.orders.length}`, orderBody(m, r, this.timeoutSeconds));
  }
  toString() {
    return `Create(${this.timeoutSeconds}s, ${this.as})`;
  }
}

/** The same create sent several times at once under one Idempotency-Key: one order, every answer naming it. */
export class CreateTogether extends Step<Model> {
  constructor(
    readonly timeoutSeconds: 1 | 2,
    readonly n: number,
    readonly as: ModelClient,
  ) {
    super();
  }
  async act(m: Model, r: Real) {
    const key = `${r.tag}-t${m.orders.length}`;
    const body = orderBody(m, r, this.timeoutSeconds);
    const answers = await Promise.all(Array.from({ length: this.n }, () => r.world.httpAs(this.as).send('POST', '/orders', body, { 'idempotency-key': key })));
    for (const res of answers) if (res.status !== 201) fail(`create ${this.n} times at once under one key`, res);
    const ids = new Set(answers.map((res) => res.body.id));
    if (ids.size !== 1) throw new Error(`create ${this.n} times at once under key ${key}: ${ids.size} orders (${[...ids].join(', ')})`);
    const first = answers[0]!;
    m.orders.push(newOrder(this.as, String(first.body.id), key, body, Date.parse(String(first.body.expiresAt))));
  }
  toString() {
    return `CreateTogether(${this.timeoutSeconds}s, ${this.n}, ${this.as})`;
  }
}

/** Acts on one of the run's orders, picked by index. */
export abstract class OnOrder extends OnPick<Model, Order> {
  protected list(m: Readonly<Model>) {
    return m.orders;
  }
  order(m: Model): Order {
    return this.picked(m);
  }
}

export class RepeatCreate extends OnOrder {
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
    const res = await r.world.httpAs(o.client).send('POST', '/orders', body, { 'idempotency-key': o.key });
    if (this.sameBody) {
      if (res.status !== 201 || res.body.id !== o.id) fail(`repeated create of ${o.id}`, res);
    } else if (res.status !== 422 || res.body.code !== 'IDEMPOTENCY_KEY_REUSED') fail(`create reusing the key of ${o.id}`, res);
  }
  toString() {
    return `RepeatCreate(${this.pick}, ${this.sameBody ? 'same' : 'other'} body)`;
  }
}
