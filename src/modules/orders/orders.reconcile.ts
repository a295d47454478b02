// The orders' safety net, a periodic job: cancels unpaid orders left well past
// their deadline (their expiry job was lost with Redis data, or never made it
// there, or was left at a later time by a move whose reschedule Redis lost)
// and re-creates missing expiry jobs of orders about to expire; likewise it
// writes payment reminders overdue past the grace with none written for the
// order's current deadline, and re-creates the jobs of those coming due. Only
// orders expiring (or to be reminded) within the next two intervals are
// looked at, which keeps each pass small whatever the backlog of future orders.
// A reminder job found pending later than its row's time (a move earlier
// whose reschedule Redis missed, or two moves whose reschedules crossed) is
// brought to the row's time when that comes before the next pass: left
// there, a reminder whose lead is shorter than the grace plus an interval
// would be overdue only once its deadline passed, never written. A job in
// flight is left to its delivery, which judges the row as it is then. An
// expiry job left late is not looked up: the overdue cancel above ends its
// order after the grace.
import { forEachPage } from '../../core/keyset.js';
import type { Logger } from '../../core/logger.js';
import type { NotificationDispatch } from '../../core/delivery/index.js';
import type { PeriodicJob, Queue, ScheduleInput } from '../../queue/index.js';
import type { OrdersRepository } from './orders.repository.js';
import { EXPIRE_JOB, REMIND_JOB, type OrdersService, expireJobId, expirePayload, remindJobId } from './orders.service.js';

export const RECONCILE_JOB = 'orders.reconcile';
export const RECONCILE_JOB_ID = 'orders:reconcile';

const CANCEL_BATCH = 500;
const MAX_CANCEL_BATCHES = 40;
const PAGE = 1_000;
/**
 * How much later than its row's time a pending job may be before the pass
 * brings it back: a job that deferred itself to the deadline is due a few ms
 * after it (the two clocks, the defer's rounding), not worth moving each pass.
 */
const PULL_SLACK_MS = 1_000;

/** A job the pass makes sure of: its id, type and payload, and its row's time. */
type Wanted = { id: string; type: string; at: Date; payload: unknown };

/**
 * Creates the jobs of `wanted` that Redis does not hold; of those it holds,
 * one pending later than its row's time, when that time comes before
 * `pullBefore`, is brought to it (only while pending: a delivery in progress
 * is left alone). Returns the jobs created and moved.
 */
export async function ensureJobs(queue: Queue, wanted: readonly Wanted[], pullBefore: number): Promise<{ created: number; pulled: number }> {
  const input = (w: Wanted, mode: ScheduleInput['mode']): ScheduleInput => ({ id: w.id, type: w.type, at: w.at, payload: w.payload, mode });
  const results = await queue.scheduleMany(wanted.map((w) => input(w, 'nx')));
  const created = results.filter((r) => r.status === 'created').length;
  const held = wanted.filter((w, i) => results[i]?.status === 'exists' && w.at.getTime() < pullBefore);
  // One lookup a job, sent together (one round trip's worth of pipelined calls).
  const jobs = await Promise.all(held.map((w) => queue.get(w.id)));
  const late = held.filter((w, i) => {
    const j = jobs[i];
    return j?.state === 'pending' && j.dueAt !== null && j.dueAt > w.at.getTime() + PULL_SLACK_MS;
  });
  if (late.length === 0) return { created, pulled: 0 };
  const moved = await queue.scheduleMany(late.map((w) => input(w, 'pending')));
  return { created, pulled: moved.filter((r) => r.status === 'updated').length };
}

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
  /** Overdue reminders written at once; reminders coming due within the horizon given their job if it has none, or brought earlier. */
  async function repairReminders(until: Date, pullBefore: number): Promise<{ reminded: number; jobsCreated: number; jobsPulled: number }> {
    let reminded = 0;
    let jobsCreated = 0;
    let jobsPulled = 0;
    await forEachPage(
      (after: { id: string; remindAt: Date } | null) => d.repo.listUnreminded(until, d.graceSeconds, after, PAGE),
      async (page) => {
        const overdue = page.filter((o) => o.overdue).map((o) => o.id);
        const written = await d.remindMany(overdue);
        reminded += [...written.values()].filter((r) => r.kind === 'written').length;
        const coming = page.filter((o) => !o.overdue);
        const r = await ensureJobs(
          d.queue,
          coming.map((o) => ({ id: remindJobId(o.id), type: REMIND_JOB, at: o.remindAt, payload: {} })),
          pullBefore,
        );
        jobsCreated += r.created;
        jobsPulled += r.pulled;
      },
    );
    return { reminded, jobsCreated, jobsPulled };
  }

  async function run(horizonMs: number): Promise<{ cancelled: number; jobsCreated: number; jobsPulled: number; reminded: number }> {
    let cancelled = 0;
    for (let i = 0; i < MAX_CANCEL_BATCHES; i++) {
      const r = await d.repo.cancelOverdue(d.graceSeconds, CANCEL_BATCH);
      cancelled += r.cancelled;
      await d.dispatch(r.notificationIds, { kind: 'ORDER_CANCELLED' });
      if (r.cancelled < CANCEL_BATCH) break;
    }
    let jobsCreated = 0;
    let jobsPulled = 0;
    const until = new Date(Date.now() + horizonMs);
    // Times past the next pass are looked at again by it, before they come.
    const pullBefore = Date.now() + Math.min(horizonMs, d.everyMs);
    await forEachPage(
      (after: { id: string; expiresAt: Date } | null) => d.repo.listUnpaid(until, after, PAGE),
      async (page) => {
        const r = await ensureJobs(
          d.queue,
          page.map((o) => ({ id: expireJobId(o.id), type: EXPIRE_JOB, at: o.expiresAt, payload: expirePayload() })),
          // Expiry jobs are not pulled: one left late is cancelled by the
          // overdue pass after the grace, and a lookup per order coming due
          // (every order, at the expiry peak) cost the stream's lateness.
          0,
        );
        jobsCreated += r.created;
        jobsPulled += r.pulled;
      },
    );
    const reminders = await repairReminders(until, pullBefore);
    jobsCreated += reminders.jobsCreated;
    jobsPulled += reminders.jobsPulled;
    const reminded = reminders.reminded;
    if (cancelled || jobsCreated || jobsPulled || reminded)
      d.log.warn({ cancelled, jobsCreated, jobsPulled, reminded }, 'orders reconciliation repaired state');
    return { cancelled, jobsCreated, jobsPulled, reminded };
  }

  const job: PeriodicJob = { id: RECONCILE_JOB_ID, type: RECONCILE_JOB, schedule: { everyMs: d.everyMs }, run: () => run(2 * d.everyMs) };
  return { run, job };
}
