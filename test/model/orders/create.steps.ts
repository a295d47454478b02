// The orders model suite's creating steps: orders created one by one, in
// bursts sharing a window, and created again under their Idempotency-Key;
// OnOrder, the base of the steps that act on an order already made.
import { OnPick, type Real, Step } from '../runner.js';
import { type Model, type Order, fail } from './model.js';

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
export class CreateBurst extends Step<Model> {
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

export class Create extends Step<Model> {
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

/** The same create sent several times at once under one Idempotency-Key: one order, every answer naming it. */
export class CreateTogether extends Step<Model> {
  constructor(
    readonly timeoutSeconds: 1 | 2,
    readonly n: number,
  ) {
    super();
  }
  async act(m: Model, r: Real) {
    const key = `${r.tag}-t${m.orders.length}`;
    const body = { customerId: r.tag, items: [{ sku: 'SKU', quantity: 1 + m.orders.length, unitPriceCents: 100 }], paymentTimeoutSeconds: this.timeoutSeconds };
    const answers = await Promise.all(Array.from({ length: this.n }, () => r.world.http.send('POST', '/orders', body, { 'idempotency-key': key })));
    for (const res of answers) if (res.status !== 201) fail(`create ${this.n} times at once under one key`, res);
    const ids = new Set(answers.map((res) => res.body.id));
    if (ids.size !== 1) throw new Error(`create ${this.n} times at once under key ${key}: ${ids.size} orders (${[...ids].join(', ')})`);
    const first = answers[0]!;
    m.orders.push({ id: String(first.body.id), key, body, expiresAt: Date.parse(String(first.body.expiresAt)), paid: false, cancelled: false });
  }
  toString() {
    return `CreateTogether(${this.timeoutSeconds}s, ${this.n})`;
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
    const res = await r.world.http.send('POST', '/orders', body, { 'idempotency-key': o.key });
    if (this.sameBody) {
      if (res.status !== 201 || res.body.id !== o.id) fail(`repeated create of ${o.id}`, res);
    } else if (res.status !== 422 || res.body.code !== 'IDEMPOTENCY_KEY_REUSED') fail(`create reusing the key of ${o.id}`, res);
  }
  toString() {
    return `RepeatCreate(${this.pick}, ${this.sameBody ? 'same' : 'other'} body)`;
  }
}
