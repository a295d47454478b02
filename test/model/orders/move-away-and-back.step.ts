// The orders model suite's step of a deadline moved away and back to the same
// instant while its payment reminder waits for a retry: the reminder the move
// away withdrew must be taken back, judged at the step, before the deadline
// (where no later step's pay or fault can leave the rule unjudged).
import { dedupeKey } from '../../../src/core/delivery/index.js';
import { sleep } from '../../helpers/redis.js';
import { type Real, Step, dbRead } from '../runner.js';
import type { ModelClient } from '../world.js';
import { create, orderBody } from './create.steps.js';
import { sendMove } from './deadline.steps.js';
import { EPS_MS, type Model, type Order, faultNear } from './model.js';
import { MOVED } from './reminder-checks.js';

/**
 * An order reminded two seconds before its deadline X, its reminder's first
 * call failed by the receiver, then its deadline moved away (X + 1 s, which
 * withdraws that reminder) and back to X: the reminder of X must be taken
 * back (expectTakenBack) and delivered (the run's checks: an order unpaid
 * through its last deadline was reminded for it, not left with a reminder a
 * move withdrew; those judge only an order no later step paid, cancelled or
 * brought a fault near).
 */
export class MoveAwayAndBack extends Step<Model> {
  constructor(readonly as: ModelClient) {
    super();
  }
  async act(m: Model, r: Real) {
    const o = await create(m, r, this.as, `${r.tag}-ab${m.orders.length}`, { ...orderBody(m, r, 4), paymentReminderBeforeSeconds: 2 });
    const x = o.expiresAt;
    await sleep(Math.max(0, x - 2_000 - 150 - Date.now()));
    r.world.receiver('fail');
    const called = () =>
      r.world.webhook.calls.some((c) => c.body.kind === 'ORDER_PAYMENT_REMINDER' && (c.body as { payload?: { orderId?: string } }).payload?.orderId === o.id);
    let away: number;
    try {
      for (const end = Date.now() + 700; !called() && Date.now() < end;) await sleep(10);
      away = Date.now();
      await sendMove(o, r, { at: x + 1_000 });
    } finally {
      r.world.receiver('ok');
    }
    const back = await sendMove(o, r, { at: x });
    // Judged only with half a second left for the reminder's job to run (a busy host may answer the move back late).
    if (back.status === 200 && Date.now() <= x - 500) await expectTakenBack(o, r, x, away);
  }
  toString() {
    return `MoveAwayAndBack(${this.as})`;
  }
}

/**
 * Polls the reminder of deadline `x` of order `o`, just moved back to it,
 * until it is live again, or until just past `x`: the move back set the
 * reminder's job to its time, long passed, so the job runs at once and must
 * take the reminder back before the deadline (after it, the job writes
 * nothing). Still withdrawn by the move away then, with no fault near
 * since `since`: the rule broke. Not written at all by then (nothing to take
 * back): left to the run's checks.
 */
async function expectTakenBack(o: Order, r: Real, x: number, since: number): Promise<void> {
  const key = dedupeKey.orderPaymentReminder(o.id, x);
  const select = { id: true, status: true, lastError: true, withdrawnAt: true } as const;
  for (;;) {
    // Judged on a read started past the deadline's margin: one started before may miss a take-back committing meanwhile.
    const startedAt = Date.now();
    const n = await dbRead(() => r.world.db.notification.findUnique({ where: { dedupeKey: key }, select }));
    if (n && n.withdrawnAt === null) return;
    if (startedAt <= x + EPS_MS) {
      await sleep(25);
      continue;
    }
    const movedAway = n?.status === 'CANCELLED' && MOVED.test(n.lastError ?? '');
    if (movedAway && !faultNear(r, since, Date.now()))
      throw new Error(
        `order ${o.id}: moved away and back to ${x}, its reminder ${n.id} of that deadline still withdrawn by the move away after it (${n.lastError})`,
      );
    return;
  }
}
