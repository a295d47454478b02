// The orders' safety net, a periodic job: cancels unpaid orders left well past
// their deadline (their expiry job was lost with Redis data, or never made it
// there, or was left at a later time by a move whose reschedule Redis lost)
// and re-creates missing expiry jobs of orders about to expire; likewise it
// writes payment reminders overdue past the grace with none written for the
// order's current deadline, and re-creates the jobs of those coming due. Only
// orders expiring (or to be reminded) within the next two intervals are
// looked at, which keeps each pass small whatever the backlog of future orders.
import { forEachPage } from '../../core/keyset.js';
import type { Logger } from '../../core/logger.js';
import type { NotificationDispatch } from '../../core/delivery/index.js';
import type { PeriodicJob, Queue } from '../../queue/index.js';
import type { OrdersRepository } from './orders.repository.js';
import { EXPIRE_JOB, REMIND_JOB, type OrdersService, expireJobId, expirePayload, remindJobId } from './orders.service.js';

export const RECONCILE_JOB = 'orders.reconcile';
export const RECONCILE_JOB_ID = 'orders:reconcile';

const CANCEL_BATCH = 500;
const MAX_CANCEL_BATCHES = 40;
const PAGE = 1_000;

export function createOrdersReconcile(d: {
  repo: OrdersRepository;
  queue: Queue;
  dispatch: NotificationDispatch;
  /** Writes due payment reminders (the reminder job's statement) and hands them to delivery. */
  remindMany: OrdersService['remindMany'];
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
  /** Overdue reminders written at once; reminders coming due within the horizon given their job if it has none. */
  async function repairReminders(until: Date): Promise<{ reminded: number; jobsCreated: number }> {
    let reminded = 0;
    let jobsCreated = 0;
    await forEachPage(
      (after: { id: string; remindAt: Date } | null) => d.repo.listUnreminded(until, d.graceSeconds, after, PAGE),
      async (page) => {
        const overdue = page.filter((o) => o.overdue).map((o) => o.id);
        const written = await d.remindMany(overdue);
        reminded += [...written.values()].filter((r) => r.kind === 'written').length;
        const coming = page.filter((o) => !o.overdue);
        const results = await d.queue.scheduleMany(
          coming.map((o) => ({ id: remindJobId(o.id), type: REMIND_JOB, at: o.remindAt, payload: {}, mode: 'nx' as const })),
        );
        jobsCreated += results.filter((r) => r.status === 'created').length;
      },
    );
    return { reminded, jobsCreated };
  }

  async function run(horizonMs: number): Promise<{ cancelled: number; jobsCreated: number; reminded: number }> {
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
    const reminders = await repairReminders(until);
    jobsCreated += reminders.jobsCreated;
    const reminded = reminders.reminded;
    if (cancelled || jobsCreated || reminded) d.log.warn({ cancelled, jobsCreated, reminded }, 'orders reconciliation repaired state');
    return { cancelled, jobsCreated, reminded };
  }

  const job: PeriodicJob = { id: RECONCILE_JOB_ID, type: RECONCILE_JOB, schedule: { everyMs: d.everyMs }, run: () => run(2 * d.everyMs) };
  return { run, job };
}
