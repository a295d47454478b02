// The orders' safety net, a periodic job: cancels unpaid orders left well past
// their deadline (their expiry job was lost with Redis data, or never made it
// there) and re-creates missing expiry jobs of orders about to expire. Only
// orders expiring within the next two intervals are looked at, which keeps
// each pass small whatever the backlog of future orders.
import { forEachPage } from '../../core/keyset.js';
import type { Logger } from '../../core/logger.js';
import type { NotificationDispatch } from '../../core/delivery/index.js';
import type { PeriodicJob, Queue } from '../../queue/index.js';
import type { OrdersRepository } from './orders.repository.js';
import { EXPIRE_JOB, expireJobId, expirePayload } from './orders.service.js';

export const RECONCILE_JOB = 'orders.reconcile';
export const RECONCILE_JOB_ID = 'orders:reconcile';

const CANCEL_BATCH = 500;
const MAX_CANCEL_BATCHES = 40;
const PAGE = 1_000;

export function createOrdersReconcile(d: {
  repo: OrdersRepository;
  queue: Queue;
  dispatch: NotificationDispatch;
  log: Logger;
  /** How long past its deadline an unpaid order may stay before the pass cancels it (the job normally does it at once). */
  graceSeconds: number;
  everyMs: number;
}) {
  /**
   * One pass: cancels long-overdue orders, and re-creates missing expiry jobs
   * of orders expiring within `horizonMs` (later ones are checked once they
   * enter that window).
   */
  async function run(horizonMs: number): Promise<{ cancelled: number; jobsCreated: number }> {
    let cancelled = 0;
    for (let i = 0; i < MAX_CANCEL_BATCHES; i++) {
      const r = await d.repo.cancelOverdue(d.graceSeconds, CANCEL_BATCH);
      cancelled += r.cancelled;
      await d.dispatch(r.notificationIds);
      if (r.cancelled < CANCEL_BATCH) break;
    }
    let jobsCreated = 0;
    const until = new Date(Date.now() + horizonMs);
    await forEachPage(
      (after: { id: string; expiresAt: Date } | null) => d.repo.listUnpaid(until, after, PAGE),
      async (page) => {
        const results = await d.queue.scheduleMany(
          page.map((o) => ({
            id: expireJobId(o.id),
            type: EXPIRE_JOB,
            at: o.expiresAt,
            payload: expirePayload(),
            mode: 'nx' as const,
          })),
        );
        jobsCreated += results.filter((r) => r.status === 'created').length;
      },
    );
    if (cancelled || jobsCreated) d.log.warn({ cancelled, jobsCreated }, 'orders reconciliation repaired state');
    return { cancelled, jobsCreated };
  }

  const job: PeriodicJob = { id: RECONCILE_JOB_ID, type: RECONCILE_JOB, schedule: { everyMs: d.everyMs }, run: () => run(2 * d.everyMs) };
  return { run, job };
}
