// The orders model suite's step racing the reminder writer with the expiry:
// a reminder committed while the expiry waits for the order's lock.
import type { Db } from '../../../src/core/db.js';
import { writePaymentReminders } from '../../../src/modules/orders/sql/write-payment-reminders.js';
import { sleep } from '../../helpers/redis.js';
import { type Real, Step, dbRead } from '../runner.js';
import type { ModelClient } from '../world.js';
import { create, orderBody } from './create.steps.js';
import type { Model, Order } from './model.js';

/**
 * An order made without a payment reminder, given one half a second before
 * its deadline (its lead set on the row: no reminder job ever existed, and
 * the reconciliation pass writes only reminders overdue past its grace);
 * then a transaction writes the reminder through the product's writer and
 * holds the order's lock past the deadline, until the expiry job waits for it
 * (or 3 s: a worker down), and commits. The expiry's statement cannot see that
 * reminder; the order must never be seen cancelled with its reminder live
 * (a delivery's claim would then start a call for a cancelled order): checked
 * here, each read one snapshot of both, until the order is cancelled (later
 * steps would hide a miss: a pay or cancel sent to the cancelled order
 * withdraws what it finds; and the run's checks: none taken after the
 * timeout).
 */
export class ReminderWrittenWhileExpiryWaits extends Step<Model> {
  constructor(readonly as: ModelClient) {
    super();
  }
  async act(m: Model, r: Real) {
    const { paymentReminderBeforeSeconds: _none, ...body } = orderBody(m, r, 2);
    const o = await create(m, r, this.as, `${r.tag}-rw${m.orders.length}`, body);
    await sleep(Math.max(0, o.expiresAt - 500 - Date.now()));
    const db = r.world.db;
    try {
      // Committed on its own: a change of the row in the writer's transaction would mark the row as the writer must.
      const set = await db.$executeRaw`UPDATE orders SET payment_reminder_before_seconds = 1, payment_remind_at = expires_at - interval '1 s'
         WHERE id = ${o.id}::uuid AND status = 'UNPAID' AND expires_at > now()`;
      if (set === 0) return;
      await db.$transaction(
        async (tx) => {
          await writePaymentReminders(tx as unknown as Db, [o.id]);
          await sleep(Math.max(0, o.expiresAt - Date.now()));
          for (const end = Date.now() + 3_000; Date.now() < end; await sleep(20)) {
            const [w] = await db.$queryRaw<{ n: number }[]>`SELECT count(*)::int AS n FROM pg_stat_activity
               WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%xmin AS v%'`;
            if (w!.n > 0) break;
          }
        },
        { timeout: 10_000 },
      );
    } finally {
      // What the row holds decides the model's lead, whatever became of the transaction's commit.
      const row = await dbRead(() => db.order.findUnique({ where: { id: o.id }, select: { paymentReminderBeforeSeconds: true } }));
      if (row?.paymentReminderBeforeSeconds === 1) {
        o.leadMs = 1_000;
        o.body = { ...o.body, paymentReminderBeforeSeconds: 1 };
      }
    }
    await expectWithdrawnOnCancel(o, r);
  }
  toString() {
    return `ReminderWrittenWhileExpiryWaits(${this.as})`;
  }
}

/** Polls `o` (a few seconds) until it is settled: cancelled, its reminder must not be live in the same snapshot (every cancel withdraws in its own statement or transaction, faults or not). */
async function expectWithdrawnOnCancel(o: Order, r: Real): Promise<void> {
  for (const end = Date.now() + 4_000; Date.now() < end; await sleep(25)) {
    const x = await dbRead(async () => {
      const [row] = await r.world.db.$queryRaw<{ status: string; live: boolean }[]>`
        SELECT o.status::text AS status, EXISTS (SELECT 1 FROM notifications n
                 WHERE n.order_id = o.id AND n.kind = 'ORDER_PAYMENT_REMINDER' AND n.status IN ('PENDING', 'FAILED', 'SENDING') AND n.withdrawn_at IS NULL) AS live
          FROM orders o WHERE o.id = ${o.id}::uuid`;
      return row;
    });
    if (!x || x.status === 'PAID') return;
    if (x.status !== 'CANCELLED') continue;
    if (!x.live) return;
    throw new Error(`order ${o.id}: cancelled by its expiry while its payment reminder (committed while the expiry waited) is live`);
  }
}
