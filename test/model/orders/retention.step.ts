// The orders model suite's retention step: the retention pass run with a
// cutoff of now amid the rest, and what it deleted noted as last seen.
import { isDatabaseUnavailable, isSerializationFailure } from '../../../src/core/db-errors.js';
import { runRetention } from '../../../src/core/retention.js';
import { createOrdersRepository } from '../../../src/modules/orders/orders.repository.js';
import { type Real, Step } from '../runner.js';
import type { Model } from './model.js';

/** Tries a database read a few times: a fault step may just have cut the test's own connections. */
async function read<T>(f: () => Promise<T>): Promise<T> {
  for (let i = 0; ; i++) {
    try {
      return await f();
    } catch (err) {
      if (i >= 5) throw err;
      await new Promise((res) => setTimeout(res, 300));
    }
  }
}

const FINAL_NOTICE = new Set(['SENT', 'FAILED', 'CANCELLED']);

/** How long a racing retention step looks for a notice on its way. */
const LOOK_MS = 1_500;

/**
 * The retention pass with a cutoff of now: every settled order whose notice
 * is settled may go, while expiries and deliveries run. `racing`: the pass
 * starts the moment a settled order's notice is found still on its way
 * (PENDING or SENDING, looked for every 10 ms for a while), where the purge's
 * guard alone keeps that order and its notice.
 */
export class Retention extends Step<Model> {
  constructor(readonly racing = false) {
    super();
  }
  async act(m: Model, r: Real) {
    const live = m.orders.filter((o) => !o.purged);
    const ids = live.map((o) => o.id);
    const db = r.world.db;
    const look = () =>
      read(() => Promise.all([db.order.findMany({ where: { id: { in: ids } } }), db.notification.findMany({ where: { orderId: { in: ids } } })]));
    let [rows, notes] = await look();
    // On its way and of a settled order: an UNPAID order's reminder is no purge's to keep.
    const settledOnItsWay = () =>
      notes.some((n) => (n.status === 'PENDING' || n.status === 'SENDING') && rows.some((x) => x.id === n.orderId && x.status !== 'UNPAID'));
    for (const end = Date.now() + LOOK_MS; this.racing && Date.now() < end; [rows, notes] = await look()) {
      if (settledOnItsWay()) break;
      await new Promise((res) => setTimeout(res, 10));
    }
    // A failed pass (the database cut off by a fault) may still have committed: what is gone says.
    const repo = createOrdersRepository(db);
    await runRetention({ olderThanSeconds: 0, batchSize: 1_000, purges: repo.retention }, 60_000).catch((err: unknown) => {
      if (!isDatabaseUnavailable(err) && !isSerializationFailure(err)) throw err;
    });
    const left = new Set((await read(() => db.order.findMany({ where: { id: { in: ids } }, select: { id: true } }))).map((x) => x.id));
    for (const o of live) {
      if (left.has(o.id)) continue;
      const row = rows.find((x) => x.id === o.id);
      const mine = notes.filter((n) => n.orderId === o.id);
      const final = row && row.status !== 'UNPAID' && mine.every((n) => FINAL_NOTICE.has(n.status) && !n.redriveRequested);
      o.purged = final ? { row, notes: mine } : 'unknown';
    }
  }
  toString() {
    return this.racing ? 'Retention(racing a notice)' : 'Retention';
  }
}
