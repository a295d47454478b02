// The delivery job: one queue job per delivery row, retried with its job
// type's spacing, FAILED and dead-lettered after the last attempt. Every
// kind of row (a notification, a timer's firing) is delivered by this one
// handler; what differs is the sender (who is called) and the queue. The
// relays, which hand over rows whose delivery job was lost, are the modules'.
// Guard: each step's statement's own (claim.ts, mark-sent.ts,
// record-failure.ts, cancel-withdrawn.ts); the job's fencing token for the
// queue. Lock order: one row at a time, by its id.
import { z } from 'zod';
import { isDatabaseUnavailable } from '../db-errors.js';
import { gatherOrEach } from '../gather.js';
import type { Logger } from '../logger.js';
import { type Job, type JobContext, type JobHandler, type JobOutcome, NonRetryableError, type Queue } from '../../queue/index.js';
import { rowJobId } from '../row-job-id.js';
import type { NotificationRow, NotificationStatus } from './contract.js';
import type { Claim } from './claim.js';
import type { Deliveries } from './transitions.js';

/** Delivery job ids: `notification:<row id>:deliver`, in whichever queue delivers the row. */
const DELIVER_JOB_ID = rowJobId('notification', 'deliver');
export const deliverJobId = DELIVER_JOB_ID.of;
/** The row a delivery job id names; null for any other job. */
export const deliveryRowOf = DELIVER_JOB_ID.rowOf;

/** Calls the outside world with one row: resolves once the receiver took it; NonRetryableError when it refused. */
export type Sender = {
  readonly name: string;
  send(row: NotificationRow, signal: AbortSignal): Promise<void>;
};

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

export type DeliveryDeps = {
  deliveries: Deliveries;
  sender: Sender;
  queue: Queue;
  log: Logger;
  /** How long a call may take (NOTIFY_TIMEOUT_MS). */
  callTimeoutMs: number;
  /** A row SENDING for longer than this has lost its call's worker (the call's timeout plus a margin). */
  sendingStaleMs: number;
};

/**
 * A delivery, in four steps: record an outcome an earlier delivery kept in
 * the job (recordKept), or make sure the lease covers the call (leaseForCall),
 * claim the row (the last look at it), call the receiver, and record what the
 * call did (recordFailed, recordSent). The row's rules are the delivery
 * room's (core/delivery/README.md).
 */
export function deliveryJobHandler(deps: DeliveryDeps): JobHandler {
  const { deliveries, sender, log } = deps;
  // Deliveries running at once share their claims and SENT marks: one
  // statement for those made in one event-loop turn, each row still judged
  // and recorded on its own (a row the statement cannot take fails alone).
  const claims = gatherOrEach<{ id: string; dueAt: Date }, Claim>(
    (items) => deliveries.claimMany(items, deps.sendingStaleMs),
    (item) => deliveries.claim(item.id, deps.sendingStaleMs, item),
    { maxBatch: GATHER_MAX, whole: isDatabaseUnavailable },
  );
  const sentMarks = gatherOrEach<string, boolean>(deliveries.markSentMany, deliveries.markSent, { maxBatch: GATHER_MAX, whole: isDatabaseUnavailable });
  /** Replaces the delivery's job (fencing this delivery) by one that only records `outcome`; false when Redis would not take it either. */
  const keep = (jobId: string, type: string, notificationId: string, outcome: KeptOutcome) =>
    deps.queue
      .schedule({ id: jobId, type, delayMs: RECORD_AGAIN_MS, payload: { notificationId, ...outcome }, mode: 'upsert' })
      .then(() => true)
      .catch(() => false);

  /**
   * An outcome an earlier delivery could not record: handed back without
   * using an attempt until it is recorded (it must not die with the job's
   * attempts during a long database outage). A refusal ends in the dead set,
   * as when it was recorded at once.
   */
  async function recordKept(notificationId: string, kept: KeptOutcome): Promise<void | JobOutcome> {
    let status: NotificationStatus | null = null;
    try {
      if ('delivered' in kept) await sentMarks.submit(notificationId);
      else status = await deliveries.recordFailure(notificationId, kept.refused, true, true);
    } catch (err) {
      log.error({ err, notificationId }, 'notification outcome still not recorded; trying again later');
      return { retryInMs: deps.sendingStaleMs };
    }
    if (status === 'FAILED' && 'refused' in kept) throw new NonRetryableError(kept.refused);
  }

  /**
   * Whether the lease covers the claim and the whole call (else another worker
   * would take the job and call the receiver a second time beside us). It is
   * renewed when what is left is short of the call's timeout plus half of the
   * rest of a lease (the config keeps the call's timeout under half a lease,
   * so a fresh claim needs no renewal), and on the last attempt, whose
   * failure ends the row FAILED: the renewal finds this delivery replaced by
   * a fresh one (a reminder taken back meanwhile), whose attempts decide.
   * Never between the claim and the call: the claim is the last look at the row.
   */
  async function leaseForCall(job: Job, ctx: JobContext): Promise<boolean> {
    const short = ctx.leaseLeftMs() < (ctx.leaseMs + deps.callTimeoutMs) / 2;
    return !(short || job.lastAttempt) || ctx.extendLease();
  }

  /**
   * The call failed: recorded (retry, FAILED, or CANCELLED if withdrawn
   * meanwhile). A refusal the database would not take is kept in the job like
   * a SENT mark: left SENDING, the row would be called again once its call
   * looked stale.
   */
  async function recordFailed(job: Job, ctx: JobContext, n: NotificationRow, err: unknown): Promise<void | JobOutcome> {
    const refused = err instanceof NonRetryableError;
    const text = err instanceof Error ? err.message : String(err);
    let status: NotificationStatus | null;
    try {
      status = await persistently(() => deliveries.recordFailure(n.id, text, refused || job.lastAttempt, refused), ctx);
    } catch (dbErr) {
      if (refused && (await keep(job.id, job.type, n.id, { refused: text.slice(0, 1_000) }))) {
        log.error({ err: dbErr, notificationId: n.id }, 'notification refused but the refusal not recorded; recording it later');
        return;
      }
      throw dbErr;
    }
    log.warn({ notificationId: n.id, attempts: job.attempts, status, error: text }, 'notification delivery failed');
    if (status === 'CANCELLED') return; // withdrawn while we called: nothing left to retry
    throw err;
  }

  /**
   * The receiver has it: the record must say so. If the database stays away,
   * the job is replaced (this delivery fenced) by one that only records SENT,
   * so the row is neither called again nor ended CANCELLED as a call of
   * unknown outcome if its subject withdraws it meanwhile. Only when Redis
   * fails too does the job come back blind (no attempt used): it finds the
   * row SENDING past its call and, the outcome unknown, sends once more.
   */
  async function recordSent(job: Job, ctx: JobContext, n: NotificationRow): Promise<void | JobOutcome> {
    try {
      await persistently(() => sentMarks.submit(n.id), ctx);
    } catch (err) {
      if (await keep(job.id, job.type, n.id, { delivered: true })) {
        log.error({ err, notificationId: n.id }, 'notification delivered but not recorded SENT; recording it later');
        return;
      }
      log.error({ err, notificationId: n.id }, 'notification delivered but not recorded SENT; trying again later');
      return { retryInMs: deps.sendingStaleMs };
    }
  }

  return async (job, ctx) => {
    const p = deliverPayload.safeParse(job.payload);
    if (!p.success) throw new NonRetryableError(`bad payload for ${job.id}`);
    const { notificationId, delivered, refused } = p.data;
    if (delivered) return recordKept(notificationId, { delivered });
    if (refused !== undefined) return recordKept(notificationId, { refused });
    if (!(await leaseForCall(job, ctx))) return; // lost: someone else has the job
    const c = await claims.submit({ id: notificationId, dueAt: new Date(job.dueAt) });
    // FAILED is called again only after an operator's redrive (recorded in
    // PostgreSQL): any other delivery finding it FAILED is the one that
    // failed it come back, or one that replaced it; the receiver refused.
    if (c.kind === 'failed') throw new NonRetryableError(`notification ${notificationId} is FAILED; a redrive sends it again`);
    // Busy: another delivery's call may still run. Early: a delivery due before its row (a firing moved later).
    if (c.kind === 'busy' || c.kind === 'early') return { retryInMs: c.inMs };
    // A withdrawal lifted since the claim looked (the slot held again) left the row to this job: it looks again.
    if (c.kind === 'withdrawn' && !(await deliveries.cancelWithdrawn(notificationId))) return { retryInMs: LOOK_AGAIN_MS };
    if (c.kind !== 'claimed') return;
    try {
      await sender.send(c.row, ctx.signal);
    } catch (err) {
      // Cut off by our own side (shutdown's grace ended): whether the call
      // reached the receiver is unknown, so nothing is recorded; the next
      // delivery waits out the call and sends once more (the receiver drops
      // a repeat by its Idempotency-Key) rather than record an untrue FAILED.
      if (ctx.signal.aborted) throw err;
      return recordFailed(job, ctx, c.row, err);
    }
    return recordSent(job, ctx, c.row);
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
