// The orders model suite's clock step: the clocks the service reads set apart
// for a while, as the guarantees say it survives ("clocks of the hosts
// apart": due times and leases on the Redis clock, business deadlines on the
// PostgreSQL clock, a handler early by the database's clock back after the
// delay the database measures). The worker hosts' wall clocks are set off for
// real (test/model/host-clock.mjs in their processes); Redis's own clock
// cannot be moved here (that takes libfaketime under redis-server, which the
// project's machines do not install), so its step ahead is stood for by what
// it does to the jobs: every expiry due within the step runs now.
import { type Real, Step } from '../runner.js';
import { MODEL_CLIENTS, type World } from '../world.js';
import { runExpiryNow } from './admin.steps.js';
import { create, orderBody } from './create.steps.js';
import type { Model } from './model.js';

/** The worker processes of the orders world, each a host of its own clock. */
export const WORKERS = 2;

/** The pending reset of each world's skewed clocks: a new step's skew replaces the last one's, whose reset must not end it. */
const resets = new WeakMap<World, ReturnType<typeof setTimeout>>();

/** Sets every worker host's clock right again (at a run's end, and when a skew's time is up). */
export function rightClocks(world: World): void {
  clearTimeout(resets.get(world));
  for (let i = 0; i < WORKERS; i++) world.setClock(i, 0);
}

/**
 * For `forMs`, each worker host's wall clock is off by its offset (ahead or
 * behind, seconds: past the payment windows), and an order is created (so
 * that one at least is open while they are); then, if `redisAheadMs`, Redis's
 * clock steps that far ahead of PostgreSQL's: the expiry job of every open
 * order whose deadline falls within it runs now, handled by workers whose
 * clocks are off. The expiries must come back at their deadlines by the
 * database's clock (never before it, and within a second after it: the run's
 * checks), whatever the hosts' clocks say. A client operation: it creates an
 * order and sends an operator's requests.
 */
export class SkewClocks extends Step<Model> {
  constructor(
    readonly offsetsMs: readonly number[],
    readonly forMs: number,
    readonly timeoutSeconds: 1 | 2,
    readonly redisAheadMs: number,
  ) {
    super();
  }
  async act(m: Model, r: Real) {
    m.clockSteps++;
    rightClocks(r.world);
    this.offsetsMs.forEach((ms, i) => r.world.setClock(i, ms));
    resets.set(
      r.world,
      setTimeout(() => rightClocks(r.world), this.forMs),
    );
    await create(m, r, MODEL_CLIENTS[0], `${r.tag}-k${m.orders.length}`, orderBody(m, r, this.timeoutSeconds));
    if (this.redisAheadMs === 0) return;
    const now = Date.now();
    const due = m.orders.filter((o) => !o.paid && !o.cancelled && !o.purged && o.expiresAt > now && o.expiresAt <= now + this.redisAheadMs);
    await Promise.all(due.map((o) => runExpiryNow(o, r)));
  }
  toString() {
    const offsets = this.offsetsMs.map((ms) => `${ms > 0 ? '+' : ''}${ms}`).join(', ');
    return `SkewClocks(workers ${offsets} ms for ${this.forMs} ms, Create(${this.timeoutSeconds}s), Redis +${this.redisAheadMs} ms)`;
  }
}
