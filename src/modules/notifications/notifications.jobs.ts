// Delivery of outbox rows: one queue job per notification, retried with the
// configured spacing, FAILED and dead-lettered after the last attempt. (The
// relay, which hands over rows whose delivery job was lost, is in
// notifications.reconcile.ts.)
import { z } from 'zod';
import { isDatabaseUnavailable } from '../../core/db-errors.js';
import { gatherOrEach } from '../../core/gather.js';
import type { Logger } from '../../core/logger.js';
import type { NotificationStatus } from '../../core/outbox.js';
import { NonRetryableError, type JobHandler, type Queue } from '../../queue/index.js';
import type { Notifier } from './notifier.js';
import type { Claim, NotificationsRepository } from './notifications.repository.js';
import { rowJobId } from '../../core/row-job-id.js';

export const DELIVER_JOB = 'notification.deliver';
const DELIVER_JOB_ID = rowJobId('notification', 'deliver');
export const deliverJobId = DELIVER_JOB_ID.of;
/** The notification a delivery job id names; null for any other job. */
export const notificationIdOf = DELIVER_JOB_ID.rowOf;

const deliverPayload = z.object({
  notificationId: z.uuid(),
  // An earlier delivery's outcome the database would not take then, kept in
  // the job: the receiver took it (records SENT), or refused it (records the
  // refusal, this error). Such a delivery calls nobody.
  delivered: z.literal(true).optional(),
  refused: z.string().max(1_000).optional(),
});
type KeptOutcome = { delivered: true } | { refused: string };
/** Claims or SENT marks sharing one statement at most. */
const GATHER_MAX = 200;
/** A delivery that found its row's withdrawal lifted while it looked comes back this soon. */
const LOOK_AGAIN_MS = 100;
/** A delivery replaced by one that only records its outcome is due this long after (the database has just failed for about 2 s). */
const RECORD_AGAIN_MS = 1_000;

/**
 * Schedules the delivery jobs of committed rows. `nx` (the default) leaves a
 * job that exists alone; `replace` starts a fresh one whatever exists (a dead
 * one, one waiting out an old backoff, one in flight: fenced), for a row that
 * was taken back from a withdrawal and must be tried from its first attempt.
 */
export function scheduleDeliveries(queue: Queue, ids: readonly string[], how: 'nx' | 'replace' = 'nx') {
  const mode = how === 'nx' ? ('nx' as const) : ('upsert' as const);
  return queue.scheduleMany(ids.map((id) => ({ id: deliverJobId(id), type: DELIVER_JOB, delayMs: 0, payload: { notificationId: id }, mode })));
}

export function notificationsJobHandlers(deps: {
  repo: NotificationsRepository;
  notifier: Notifier;
  queue: Queue;
  log: Logger;
  /** How long a call may take (NOTIFY_TIMEOUT_MS). */
  callTimeoutMs: number;
  /** A row SENDING for longer than this has lost its call's worker (the call's timeout plus a margin). */
  sendingStaleMs: number;
}): Record<string, JobHandler> {
  const { repo, notifier, log } = deps;
  // Deliveries running at once share their claims and SENT marks: one
  // statement for those made in one event-loop turn, each row still judged
  // and recorded on its own (a row the statement cannot take fails alone).
  const claims = gatherOrEach<{ id: string; dueAt: Date }, Claim>(
    (items) => repo.claimMany(items, deps.sendingStaleMs),
    (item) => repo.claim(item.id, deps.sendingStaleMs, item),
    { maxBatch: GATHER_MAX, whole: isDatabaseUnavailable },
  );
  const sentMarks = gatherOrEach<string, boolean>(repo.markSentMany, repo.markSent, { maxBatch: GATHER_MAX, whole: isDatabaseUnavailable });
  /** Replaces the delivery's job (fencing this delivery) by one that only records `outcome`; false when Redis would not take it either. */
  const keep = (jobId: string, notificationId: string, outcome: KeptOutcome) =>
    deps.queue
      .schedule({ id: jobId, type: DELIVER_JOB, delayMs: RECORD_AGAIN_MS, payload: { notificationId, ...outcome }, mode: 'upsert' })
      .then(() => true)
      .catch(() => false);
  return {
    [DELIVER_JOB]: async (job, ctx) => {
      const p = deliverPayload.safeParse(job.payload);
      if (!p.success) throw new NonRetryableError(`bad payload for ${job.id}`);
      const { notificationId, delivered, refused: refusal } = p.data;
      if (delivered || refusal !== undefined) {
        // What it knows must not die with the job's attempts (a long database
        // outage): handed back, no attempt used, until it is recorded.
        let status: NotificationStatus | null = null;
        try {
          if (delivered) await sentMarks.submit(notificationId);
          else status = await repo.recordFailure(notificationId, refusal!, true, true);
        } catch (err) {
          log.error({ err, notificationId }, 'notification outcome still not recorded; trying again later');
          return { retryInMs: deps.sendingStaleMs };
        }
        // A refusal ends in the dead set, as when it was recorded at once (an operator may redrive it).
        if (status === 'FAILED') throw new NonRetryableError(refusal!);
        return;
      }
      // The claim and the whole call must fit in our lease, or another worker
      // would take the job and call the receiver a second time beside us. It
      // is renewed first when what is left of it is short of the call's
      // timeout plus half of the rest of a lease for the claim (the config
      // keeps the call's timeout under half a lease, so a fresh claim's lease
      // needs no renewal: a Redis call saved per delivery), and on the last
      // attempt, whose failure ends the row FAILED: the renewal is what finds
      // this delivery replaced by a fresh one (a reminder taken back while
      // this job waited), whose own attempts must decide (review of 8d4cf4d).
      // Never between the claim and the call: the claim is the last look at
      // the row (a cancel committed during a slow renewal must stop the
      // call). A lease already lost: someone else has the job.
      const short = ctx.leaseLeftMs() < (ctx.leaseMs + deps.callTimeoutMs) / 2;
      if ((short || job.lastAttempt) && !(await ctx.extendLease())) return;
      // A FAILED row is called again only after an operator's redrive,
      // recorded in PostgreSQL (requestRedrive). Any other delivery that finds
      // it FAILED is the one that failed it come back (Redis hung or lost its
      // last writes; a busy hand-back refunded its attempt) or one that
      // replaced it (a reminder taken back while its refused call ran): the
      // receiver already refused it, so the job goes to the dead set, uncalled.
      const c = await claims.submit({ id: notificationId, dueAt: new Date(job.dueAt) });
      if (c.kind === 'failed') throw new NonRetryableError(`notification ${notificationId} is FAILED; a redrive sends it again`);
      // Never send twice, nor what its domain withdrew (a reminder of a cancelled or moved slot).
      if (c.kind === 'busy') return { retryInMs: c.inMs };
      // A withdrawal lifted since the claim looked (the slot held again) left
      // the row to this job: it looks again rather than end with it.
      if (c.kind === 'withdrawn' && !(await repo.cancelWithdrawn(notificationId))) return { retryInMs: LOOK_AGAIN_MS };
      if (c.kind !== 'claimed') return;
      const n = c.row;
      try {
        await notifier.send(n, ctx.signal);
      } catch (err) {
        // Cut off by our own side (shutdown's grace ended; the signal is
        // shutdown's, a lost lease does not abort a call): whether the call
        // reached the receiver is unknown, so nothing is recorded. The row
        // stays SENDING; the delivery that comes next waits out the call and
        // sends once more (the receiver drops a repeat by its
        // Idempotency-Key), rather than a FAILED that may be untrue.
        if (ctx.signal.aborted) throw err;
        const refused = err instanceof NonRetryableError;
        const final = refused || job.lastAttempt;
        const text = err instanceof Error ? err.message : String(err);
        let status: NotificationStatus | null;
        try {
          status = await persistently(() => repo.recordFailure(n.id, text, final, refused), ctx);
        } catch (dbErr) {
          // A refusal is final: kept in the job like a SENT mark, or the row,
          // left SENDING, would be called again once its call looked stale
          // (notifications soak seed 302744025: a 400 during a database outage,
          // called again 5.6 s later). A failure to retry anyway needs no keeping.
          if (refused && (await keep(job.id, n.id, { refused: text.slice(0, 1_000) }))) {
            log.error({ err: dbErr, notificationId: n.id }, 'notification refused but the refusal not recorded; recording it later');
            return;
          }
          throw dbErr;
        }
        log.warn({ notificationId: n.id, attempts: job.attempts, status, error: text }, 'notification delivery failed');
        // Withdrawn while we called: nothing left to retry.
        if (status === 'CANCELLED') return;
        throw err;
      }
      // The receiver has it: the record must say so. If the database stays
      // away (or a write fails as shutdown's grace ends), what this delivery
      // knows must outlive it: its job is replaced (this delivery fenced;
      // whatever state the job is in: the receiver took this notification) by
      // one that only records SENT, so the row is neither called again nor,
      // if its subject withdraws it meanwhile, ended CANCELLED as a call of
      // unknown outcome. Only when Redis fails too (or loses that write) does
      // the job come back blind (no attempt used): it finds the row SENDING
      // past its call and, its outcome unknown, sends once more.
      try {
        await persistently(() => sentMarks.submit(n.id), ctx);
      } catch (err) {
        if (await keep(job.id, n.id, { delivered: true })) {
          log.error({ err, notificationId: n.id }, 'notification delivered but not recorded SENT; recording it later');
          return;
        }
        log.error({ err, notificationId: n.id }, 'notification delivered but not recorded SENT; trying again later');
        return { retryInMs: deps.sendingStaleMs };
      }
    },
  };
}

// A write after the receiver answered must not fail on a passing database
// hiccup (a dropped connection): it is tried again for a while, the lease
// renewed meanwhile.
const PERSIST_TRIES = 6;
const PERSIST_PAUSE_MS = 100;

async function persistently<T>(write: () => Promise<T>, ctx: { extendLease(): Promise<boolean>; readonly signal: AbortSignal }): Promise<T> {
  for (let i = 1; ; i++) {
    try {
      return await write();
    } catch (err) {
      if (i >= PERSIST_TRIES || ctx.signal.aborted) throw err;
      await new Promise((r) => setTimeout(r, PERSIST_PAUSE_MS * i));
      await ctx.extendLease().catch(() => false);
    }
  }
}
