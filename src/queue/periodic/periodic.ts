// Periodic jobs: work that runs on a schedule (every N ms, or a cron pattern in
// a time zone) on the delay queue itself. Each periodic job is one job under a
// fixed id. When an occurrence's work is done, its handler answers the next
// occurrence's time, and the worker moves the job there in the same atomic
// step that finishes this delivery: there is always exactly one pending
// occurrence, however many workers run, and never a moment with none or two.
// A job whose occurrence passed while no worker ran (downtime) runs once on
// recovery, then moves to the next occurrence after now: missed slots are not
// replayed one by one.
import { Cron } from 'croner';
import { TimeoutError, withTimeout } from '../timeout.js';
import { QueueErrorCode, QueueInputError } from '../errors.js';
import type { Queue } from '../producer/queue.js';
import type { JobHandler, QueueLogger } from '../types.js';

export type Schedule = { readonly everyMs: number } | { readonly cron: string; readonly timezone?: string };

export type PeriodicJob = {
  /** The job id: deterministic, one per periodic job. */
  readonly id: string;
  /** Its job type in the queue (with the type's options). */
  readonly type: string;
  readonly schedule: Schedule;
  /**
   * One occurrence's work. `occurrence` is the scheduled time it stands for (ms
   * since epoch): a cron time, or the due time of an every-N-ms job. A worker
   * that dies mid-run means the occurrence runs again: make it idempotent per
   * occurrence.
   */
  run(ctx: { readonly occurrence: number; readonly signal: AbortSignal }): Promise<unknown>;
  /** How soon a failed run is tried again (ms), unless the next occurrence comes first. Default FAILED_RUN_RETRY_MS. */
  readonly retryAfterMs?: number;
  /**
   * How long one run may take (ms; default MAX_RUN_MS). A run still going then
   * is abandoned: its signal aborts, the occurrence counts as failed and is
   * tried again as such, and the job's lease is no longer renewed for it. A
   * run that ignores its signal may go on beside the next one: runs must
   * tolerate that (conditional updates do).
   */
  readonly maxRunMs?: number;
};

/** A failed run is tried again after this, or at the next occurrence if that is sooner. */
export const FAILED_RUN_RETRY_MS = 30_000;
/**
 * A run is abandoned after this: one hung on a connection that never answers
 * (a network that drops packets) would otherwise keep renewing its lease, and
 * its job's schedule, a reconciliation pass that is the domains' safety net
 * among them, would stop for good.
 */
export const MAX_RUN_MS = 10 * 60_000;
/** How often the keeper checks that each periodic job exists, at most. */
const KEEPER_EVERY_MS = 60_000;
/**
 * A cron job's next occurrence is the one after the occurrence it just ran,
 * unless that is this far in the past (it ran late, after downtime): then the
 * first one after now. The slack covers a host clock a little ahead of
 * Redis's, which must not skip an occurrence that is just coming up.
 */
const CATCH_UP_SLACK_MS = 1_000;

const crons = new Map<string, Cron>();
function cronOf(s: { cron: string; timezone?: string }): Cron {
  const key = `${s.cron}@${s.timezone ?? ''}`;
  let c = crons.get(key);
  if (!c) {
    c = new Cron(s.cron, { ...(s.timezone && { timezone: s.timezone }), paused: true });
    crons.set(key, c);
  }
  return c;
}

/** Throws a QueueInputError naming what is wrong with the periodic job's schedule or limits. */
export function checkPeriodicJob(job: PeriodicJob): void {
  checkSchedule(job.schedule);
  for (const [name, ms] of [
    ['retryAfterMs', job.retryAfterMs],
    ['maxRunMs', job.maxRunMs],
  ] as const) {
    if (ms !== undefined && (!Number.isSafeInteger(ms) || ms < 1)) {
      throw new QueueInputError(QueueErrorCode.INVALID_OPTIONS, `${name} of periodic job ${job.id} must be a positive integer: ${ms}`);
    }
  }
}

/** Throws a QueueInputError naming what is wrong with the schedule. */
export function checkSchedule(s: Schedule): void {
  if ('everyMs' in s) {
    if (!Number.isInteger(s.everyMs) || s.everyMs < 10)
      throw new QueueInputError(QueueErrorCode.INVALID_OPTIONS, `everyMs must be an integer >= 10: ${s.everyMs}`);
    return;
  }
  try {
    if (cronOf(s).nextRun(new Date()) === null) throw new Error('it never fires');
  } catch (err) {
    const what = `cron "${s.cron}"${s.timezone ? ` in ${s.timezone}` : ''}`;
    throw new QueueInputError(QueueErrorCode.INVALID_OPTIONS, `bad schedule ${what}: ${err instanceof Error ? err.message : String(err)}`);
  }
}

export function describeSchedule(s: Schedule): string {
  return 'everyMs' in s ? `every ${s.everyMs} ms` : `cron ${s.cron}${s.timezone ? ` ${s.timezone}` : ''}`;
}

/** The first occurrence strictly after `after` (ms since epoch). */
export function nextOccurrence(s: Schedule, after: number): number {
  if ('everyMs' in s) return after + s.everyMs;
  const next = cronOf(s).nextRun(new Date(after));
  if (!next) throw new Error(`${describeSchedule(s)} has no occurrence after ${new Date(after).toISOString()}`);
  return next.getTime();
}

/**
 * The occurrence a run due at `dueAt` stands for: the latest cron time at or
 * before it (a run lands on its occurrence exactly: see the worker's retryAt).
 */
export function occurrenceOf(s: Schedule, dueAt: number): number {
  if ('everyMs' in s) return dueAt;
  return (
    cronOf(s)
      .previousRuns(1, new Date(dueAt + 1))[0]
      ?.getTime() ?? dueAt
  );
}

/** When a periodic job that does not exist yet is first due: at once for every-N-ms work, at the next cron time otherwise. */
function firstDue(s: Schedule, now: number): number {
  return 'everyMs' in s ? now : nextOccurrence(s, now);
}

/** The time a periodic job moves to after a run of `occurrence` that ended at `now`. */
export function nextAfterRun(s: Schedule, occurrence: number, now: number): number {
  // Every N ms counts from the end of a run: runs never overlap or bunch up.
  if ('everyMs' in s) return now + s.everyMs;
  const next = nextOccurrence(s, occurrence);
  return next >= now - CATCH_UP_SLACK_MS ? next : nextOccurrence(s, now);
}

/**
 * The handler of a periodic job: runs it, keeps its lease while it runs
 * (renewed at a third of the lease) but no longer than its time limit, and
 * answers the next occurrence. A failed or abandoned run logs and comes back
 * after FAILED_RUN_RETRY_MS or at the next occurrence, whichever is sooner;
 * for a cron job the retry still stands for the occurrence that failed, as
 * long as it comes before the next one.
 */
export function periodicHandler(job: PeriodicJob, log: QueueLogger): JobHandler {
  checkPeriodicJob(job);
  const limitMs = job.maxRunMs ?? MAX_RUN_MS;
  return async (j, ctx) => {
    const renew = setInterval(() => void ctx.extendLease().catch(() => {}), Math.max(100, Math.floor(ctx.leaseMs / 3)));
    const overrun = new AbortController();
    const occurrence = occurrenceOf(job.schedule, j.dueAt);
    try {
      await withTimeout(job.run({ occurrence, signal: AbortSignal.any([ctx.signal, overrun.signal]) }), limitMs, 'periodic run');
    } catch (err) {
      if (err instanceof TimeoutError) overrun.abort(err); // abandoned: tell the run to stop
      log.error({ err, jobId: job.id, occurrence: new Date(occurrence).toISOString() }, 'periodic run failed; trying again soon');
      // Times on the Redis clock (ctx.now()), which the job's due times are on:
      // this host's clock may be off by more than a short period.
      const now = ctx.now();
      return { retryAt: Math.min(now + (job.retryAfterMs ?? FAILED_RUN_RETRY_MS), nextAfterRun(job.schedule, occurrence, now)) };
    } finally {
      clearInterval(renew);
    }
    return { retryAt: nextAfterRun(job.schedule, occurrence, ctx.now()) };
  };
}

/**
 * Keeps each periodic job of a queue in existence: creates it (only if absent)
 * at start and then every period (at most a minute apart), in case Redis lost
 * it; redrives it if it was dead-lettered; and moves it when its schedule
 * changed since it was created (a new deployment).
 */
export function startPeriodicKeeper(queue: Queue, jobs: readonly PeriodicJob[], log: QueueLogger): { stop(): void } {
  const ensure = async (job: PeriodicJob) => {
    const schedule = describeSchedule(job.schedule);
    try {
      const now = Date.now();
      const r = await queue.schedule({ id: job.id, type: job.type, at: firstDue(job.schedule, now), payload: { schedule }, mode: 'nx' });
      if (r.status === 'created') {
        log.info({ queue: queue.name, jobId: job.id, schedule, dueAt: new Date(r.dueAt).toISOString() }, 'periodic job (re)created');
        return;
      }
      // A periodic job must never stay dead: that would end its chain silently.
      if (r.status === 'dead' && (await queue.redrive(job.id))) {
        log.warn({ queue: queue.name, jobId: job.id }, 'periodic job was dead-lettered; redriven');
        return;
      }
      const info = await queue.get(job.id);
      // A new deployment changed the schedule: move the waiting job, but only
      // while it waits for a future time (an overdue one runs first, and its
      // run re-arms it on the new schedule) and never while a run is in
      // progress ('pending' mode: the move is refused then, atomically).
      const stored = (info?.payload as { schedule?: unknown } | null)?.schedule;
      if (info?.state === 'pending' && stored !== schedule && (info.dueAt ?? 0) > now) {
        const at = nextAfterRun(job.schedule, now, now); // one new period on, or the next cron time
        const moved = await queue.schedule({ id: job.id, type: job.type, at, payload: { schedule }, mode: 'pending' });
        if (moved.status === 'updated') log.info({ queue: queue.name, jobId: job.id, schedule }, 'periodic job moved to its new schedule');
      }
    } catch (err) {
      log.warn({ err, queue: queue.name, jobId: job.id }, 'could not ensure periodic job; retrying next period');
    }
  };
  const timers = jobs.map((job) => {
    void ensure(job);
    const every = 'everyMs' in job.schedule ? Math.min(job.schedule.everyMs, KEEPER_EVERY_MS) : KEEPER_EVERY_MS;
    const t = setInterval(() => void ensure(job), every);
    t.unref();
    return t;
  });
  return { stop: () => timers.forEach(clearInterval) };
}
