// The consumer side of one delay queue: claims due jobs from every shard in
// batches, runs them on a bounded pool, acks in bulk, retries failures with
// backoff, dead-letters what cannot succeed, and stops gracefully.
import { setMaxListeners } from 'node:events';
import { type AckBatcher, createAckBatcher } from './ack-batcher.js';
import { adaptivePrefetch, fixedPrefetch } from './prefetch-budget.js';
import { NonRetryableError, QueueErrorCode, QueueInputError } from '../errors.js';
import type { ShardKeys } from '../keys.js';
import { type Queue, decodePayload } from '../producer/queue.js';
import { parseRecord } from '../record.js';
import { timeOf } from '../producer/schedule-input.js';
import { createFailureHandler } from './job-failure.js';
import { type ClaimedRaw, type RedisClient, runExtend, runNack, runRelease } from '../scripts/scripts.js';
import { createServerClock, localNow } from '../wake/server-clock.js';
import { type ShardPoller, createShardPoller } from './shard-poller.js';
import {
  type AnyJobHandler,
  type BatchContext,
  type BatchOutcome,
  type Job,
  type JobBatchHandler,
  type JobContext,
  type JobOutcome,
  type QueueLogger,
  type WorkerEvent,
  silentLogger,
} from '../types.js';
import { type WakeSubscriber, listenForWakeUps } from '../wake/wake-subscriber.js';

export type WorkerOptions = {
  readonly queue: Queue;
  /** Connection for scripts. */
  readonly redis: RedisClient;
  /** Connection for Pub/Sub (it cannot run other commands); default: a duplicate of redis. */
  readonly subscriber?: RedisClient;
  /** A handler for every job type of the queue: one job at a time, or a batch (JobBatchHandler). */
  readonly handlers: Readonly<Record<string, AnyJobHandler>>;
  /** Handler calls running at once (a batch is one). Default 50. */
  readonly concurrency?: number;
  /**
   * Claimed jobs waiting for a free slot, beyond the running ones. Default:
   * adaptive, from max(concurrency, 20) up to about 50 ms of work at the recent
   * completion rate (at most 1 000); a number fixes it.
   */
  readonly prefetch?: number;
  /** Max jobs per claim call. Default 200. */
  readonly batchSize?: number;
  /** Lease of a claimed job (ms); a job not acked by then is delivered again. Default 30 s. */
  readonly leaseMs?: number;
  /** Longest sleep without a claim, the safety net for a missed wake message (ms). Default 5 s. */
  readonly idleRecheckMs?: number;
  /** How long stop() lets running handlers finish (ms). Default 10 s. */
  readonly shutdownGraceMs?: number;
  /**
   * A claim not answered this long (ms) counts as lost and is tried again; a
   * claim that reaches Redis later than this (on a connection to a server that
   * hung meanwhile) changes nothing there. Keep it below the connection's
   * socket timeout. Default 2 s.
   */
  readonly claimTimeoutMs?: number;
  readonly log?: QueueLogger;
  readonly onEvent?: (e: WorkerEvent) => void;
};

/**
 * A claimed job: `claimedAt`, the local time its claim was asked (its lease
 * runs from a moment after it); `leaseUntil`, the local time before which
 * its lease is surely held (leaseMs from when the claim, or the last
 * renewal that held, was asked).
 */
type Claimed = { readonly job: Job; readonly claimedAt: number; leaseUntil: number };
/** How long a claimed job's lease is surely held still (ms; 0 or less: lost, or about to be). */
const leaseLeft = (c: Claimed): number => c.leaseUntil - localNow();
/** A batch job type's waiting jobs and its calls running now. */
type BatchLane = { readonly handler: JobBatchHandler; readonly max: number; readonly limit: number; waiting: Claimed[]; running: number };

const DEFAULT_MAX_BATCH = 100;
const DEFAULT_BATCH_CONCURRENCY = 2;

const ABORT_SETTLE_MS = 1_000;
/** Longest lease a handler may ask for. */
const MAX_LEASE_MS = 24 * 3_600_000;
/** How often dead jobs past the queue's retention are removed. */
const DEAD_SWEEP_EVERY_MS = 60_000;
const MAX_PREFETCH = 1_000;
const PREFETCH_WORK_MS = 50;
const STALLED_MS = 1_000;

export type Worker = {
  start(): Promise<void>;
  /** Stop claiming, release unstarted jobs, let running ones finish within the grace period. */
  stop(): Promise<{ released: number; unfinished: number }>;
};

export function createWorker(o: WorkerOptions): Worker {
  const { queue, redis } = o;
  const log = o.log ?? silentLogger;
  const emit = (e: WorkerEvent): void => {
    try {
      o.onEvent?.(e);
    } catch (err) {
      log.error({ err, event: e.kind }, 'worker event listener threw');
    }
  };
  const concurrency = o.concurrency ?? 50;
  const prefetch =
    o.prefetch !== undefined ? fixedPrefetch(o.prefetch) : adaptivePrefetch({ base: Math.max(concurrency, 20), max: MAX_PREFETCH, workMs: PREFETCH_WORK_MS });
  const leaseMs = o.leaseMs ?? 30_000;
  const idleRecheckMs = o.idleRecheckMs ?? 5_000;
  const graceMs = o.shutdownGraceMs ?? 10_000;
  const lanes = new Map<string, BatchLane>();
  for (const type of queue.types) {
    const h = o.handlers[type];
    if (typeof h === 'function') continue;
    if (typeof h?.batch !== 'function') throw new Error(`worker for queue ${queue.name} has no handler for ${type}`);
    const max = h.maxBatch ?? DEFAULT_MAX_BATCH;
    const limit = h.concurrency ?? DEFAULT_BATCH_CONCURRENCY;
    if (!Number.isSafeInteger(max) || max < 1 || !Number.isSafeInteger(limit) || limit < 1) {
      throw new Error(`batch handler for ${type}: maxBatch and concurrency must be whole numbers from 1`);
    }
    lanes.set(type, { handler: h, max, limit, waiting: [], running: 0 });
  }

  const clock = createServerClock();
  const shutdown = new AbortController();
  // Every running handler may listen to it (a webhook call each): no listener limit.
  setMaxListeners(0, shutdown.signal);
  const buffer: Claimed[] = [];
  /** Handler calls in progress, and the jobs they hold (a batch holds many). */
  const running = new Set<Promise<void>>();
  let runningJobs = 0;
  let stopping = false;
  let stopped: Promise<{ released: number; unfinished: number }> | null = null;
  let wake: WakeSubscriber | null = null;
  let deadSweep: NodeJS.Timeout | null = null;

  const fail = createFailureHandler({ queue, redis, log, emit, shutdown: shutdown.signal });
  const acks: AckBatcher[] = queue.keys.map((k) => createAckBatcher(redis, k, log, (id) => emit({ kind: 'stale', queue: queue.name, id, op: 'ack' })));
  const buffered = () => {
    let n = buffer.length;
    for (const lane of lanes.values()) n += lane.waiting.length;
    return n;
  };
  const room = () => (stopping ? 0 : concurrency + prefetch.current() - runningJobs - buffered());
  // A poller waiting for room is woken once a useful batch fits, not per finished job.
  const lowWater = () => Math.max(1, Math.floor((concurrency + prefetch.current()) / 4));
  const pollers: ShardPoller[] = queue.keys.map((keys, shard) =>
    createShardPoller({
      redis,
      keys,
      shard,
      clock,
      log,
      batchSize: o.batchSize ?? 200,
      leaseMs,
      idleRecheckMs,
      claimTimeoutMs: o.claimTimeoutMs ?? 2_000,
      room,
      accept,
      onClaim: (count, reclaimed) => emit({ kind: 'claimed', queue: queue.name, count, reclaimed }),
      onConnectionSuspect: () => redis.disconnect(true),
    }),
  );

  function accept(raws: ClaimedRaw[], shard: number, claimedAt: number, late: boolean): void {
    // A claim that answered after its timeout may bring more than there is room
    // for now (or land during shutdown): the rest goes back at once, not after
    // its lease. (Claims answered in time asked for what there was room for;
    // the shards' claims may overlap a little, which the pool absorbs.)
    const space = late ? Math.max(0, room()) : Number.POSITIVE_INFINITY;
    const k = queue.keys[shard] as ShardKeys;
    const surplus: { id: string; token: number }[] = [];
    let taken = 0;
    for (const raw of raws) {
      let job: Job;
      try {
        job = jobOf(raw, shard);
      } catch (err) {
        // The claim script reads records by the same rule, so this is a bug or a
        // hand-edited key; one job must not take the worker down with it.
        void deadLetterUnreadable(k, raw, err);
        continue;
      }
      if (taken >= space) {
        surplus.push({ id: job.id, token: job.token });
        continue;
      }
      (lanes.get(job.type)?.waiting ?? buffer).push({ job, claimedAt, leaseUntil: claimedAt + leaseMs });
      taken++;
    }
    if (surplus.length > 0) {
      runRelease(redis, k, surplus).catch((err: unknown) =>
        log.error({ err, queue: queue.name, count: surplus.length }, 'release failed; jobs return after their lease'),
      );
    }
    pump();
  }

  function jobOf(raw: ClaimedRaw, shard: number): Job {
    const rec = parseRecord(raw.record);
    const maxAttempts = queue.maxAttemptsOf(rec.type, rec.maxAttempts);
    return {
      queue: queue.name,
      shard,
      id: raw.id,
      type: rec.type,
      payload: rec.payload,
      attempts: rec.attempts,
      maxAttempts,
      lastAttempt: rec.attempts >= maxAttempts,
      dueAt: raw.dueAt,
      token: rec.token,
    };
  }

  async function deadLetterUnreadable(k: ShardKeys, raw: ClaimedRaw, err: unknown): Promise<void> {
    log.error({ err, queue: queue.name, jobId: raw.id }, 'claimed job record unreadable; dead-lettering it');
    const token = Number(/^(\d+),/.exec(raw.record)?.[1] ?? NaN);
    if (!Number.isSafeInteger(token)) return; // not even a token: it returns after its lease and the claim parks it
    try {
      await runNack(redis, k, raw.id, token, 'dead', 0, `unreadable job record: ${String(err)}`.slice(0, 2_000));
    } catch (nackErr) {
      log.error({ err: nackErr, queue: queue.name, jobId: raw.id }, 'dead-lettering failed; the job returns after its lease');
    }
  }

  function pump(): void {
    if (stopping) return;
    let started = true;
    while (started && running.size < concurrency) {
      started = false;
      for (const [type, lane] of lanes) {
        if (lane.waiting.length === 0 || lane.running >= lane.limit || running.size >= concurrency) continue;
        const batch = lane.waiting.splice(0, lane.max);
        lane.running++;
        launch(runBatch(type, lane.handler, batch), batch.length, batch[0]?.job.id, () => lane.running--);
        started = true;
      }
      const c = running.size < concurrency ? buffer.shift() : undefined;
      if (c) {
        launch(
          run(c).then((ran) => (ran ? 1 : 0)),
          1,
          c.job.id,
        );
        started = true;
      }
    }
    // Jobs slowed down since they were claimed (the oldest waiting one has
    // waited long): hand back what is waiting beyond the budget, so other
    // workers take it now instead of it waiting here behind slow handlers.
    const budget = prefetch.current();
    for (const waiting of [buffer, ...[...lanes.values()].map((l) => l.waiting)]) {
      const head = waiting[0];
      if (head && waiting.length > budget && localNow() - head.claimedAt > STALLED_MS) void releaseWaiting(waiting, budget);
    }
    if (room() >= lowWater()) for (const p of pollers) if (p.starved) p.wakeNow();
  }

  /** Runs one handler call holding `jobs` claimed jobs; `ran` resolves to how many were run (not lost while they waited). */
  function launch(ran: Promise<number>, jobs: number, firstId: string | undefined, done?: () => void): void {
    runningJobs += jobs;
    const p = ran
      .then((n) => {
        for (let i = 0; i < n; i++) prefetch.completed();
      })
      .catch((err: unknown) => log.error({ err, queue: queue.name, jobId: firstId, jobs }, 'job run failed; its jobs return after their lease'))
      .finally(() => {
        running.delete(p);
        runningJobs -= jobs;
        done?.();
        pump();
      });
    running.add(p);
  }

  /** Runs one claimed job; false when it was not run (its lease was lost while it waited). */
  async function run(c: Claimed): Promise<boolean> {
    const { job } = c;
    // A job that waited in the buffer for much of its lease renews it first,
    // so a slow pool never lets the lease run out before the handler starts.
    if (leaseLeft(c) < leaseMs / 2 && !(await extend(c, leaseMs))) return false;
    const started = localNow();
    emit({ kind: 'started', job, latenessMs: clock.now() - job.dueAt });
    const ctx = contextOf(c);
    let outcome: void | JobOutcome;
    try {
      const handler = o.handlers[job.type];
      if (typeof handler !== 'function') throw new NonRetryableError(`no handler for job type ${job.type}`);
      outcome = await handler(runnable(job), ctx);
    } catch (err) {
      await fail(job, err);
      return true;
    }
    await applyOutcome(job, outcome, started);
    return true;
  }

  function contextOf(c: Claimed): JobContext {
    return {
      signal: shutdown.signal,
      extendLease: async (ms) => extend(c, checkLease(ms ?? leaseMs)),
      leaseLeftMs: () => leaseLeft(c),
      leaseMs,
      now: clock.now,
    };
  }

  /**
   * The job as its handler sees it: payload decoded. Throws (a
   * NonRetryableError) for a job that must not run: its payload unreadable, or
   * past its attempts (claims count attempts, so a job whose deliveries all
   * lost their lease, crashing or hanging their workers, arrives here past
   * its limit).
   */
  function runnable(job: Job): Job {
    if (job.attempts > job.maxAttempts) throw new NonRetryableError(`lease expired on each of ${job.maxAttempts} attempts; not run again`);
    return { ...job, payload: decodeOrFail(job.payload as string) };
  }

  /**
   * Runs claimed jobs of one batch type in one call: every job's lease held
   * (renewed first if it waited long), each outcome then applied to its own
   * job, fenced by its own token, as run() applies a single handler's.
   */
  async function runBatch(type: string, handler: JobBatchHandler, claimed: readonly Claimed[]): Promise<number> {
    // A renewal that fails (a Redis hiccup) drops only its own job: it returns after its lease.
    const held = await Promise.all(claimed.map(async (c) => (leaseLeft(c) < leaseMs / 2 ? extend(c, leaseMs).catch(() => false) : true)));
    const jobs: Job[] = [];
    const leases = new Map<Job, Claimed>();
    const failures: Promise<void>[] = [];
    claimed.forEach((c, i) => {
      if (!held[i]) return;
      emit({ kind: 'started', job: c.job, latenessMs: clock.now() - c.job.dueAt });
      try {
        const job = runnable(c.job);
        jobs.push(job);
        leases.set(job, c);
      } catch (err) {
        failures.push(fail(c.job, err));
      }
    });
    const ran = jobs.length + failures.length;
    if (jobs.length === 0) {
      await Promise.all(failures);
      return ran;
    }
    const started = localNow();
    const ctx: BatchContext = {
      signal: shutdown.signal,
      extendLeases: async (ms) => {
        const until = checkLease(ms ?? leaseMs);
        return Promise.all(jobs.map((j) => extend(leases.get(j)!, until)));
      },
      of: (job) => {
        const c = leases.get(job);
        if (!c) throw new Error(`job ${job.id} is not of this batch`);
        return contextOf(c);
      },
      leaseMs,
      now: clock.now,
    };
    let outcomes: readonly BatchOutcome[];
    try {
      outcomes = await handler.batch(jobs, ctx);
      // Checked whole before any is applied: a malformed answer fails every job, never half the batch.
      if (!Array.isArray(outcomes) || outcomes.length !== jobs.length) {
        throw new Error(`batch handler for ${type} answered ${Array.isArray(outcomes) ? outcomes.length : 'no'} outcomes for ${jobs.length} jobs`);
      }
      const bad = outcomes.findIndex((x) => x !== undefined && (typeof x !== 'object' || x === null));
      if (bad >= 0) throw new Error(`batch handler for ${type} answered ${String(outcomes[bad])} for job ${jobs[bad]?.id}`);
    } catch (err) {
      await Promise.all([...failures, ...jobs.map((j) => fail(j, err))]);
      return ran;
    }
    await Promise.all([
      ...failures,
      ...jobs.map((j, i) => {
        const outcome = outcomes[i];
        return outcome && 'error' in outcome ? fail(j, outcome.error) : applyOutcome(j, outcome, started);
      }),
    ]);
    return ran;
  }

  /** A handler's answer for one job: handed back at the time it names, or done (acked in bulk). */
  async function applyOutcome(job: Job, outcome: void | JobOutcome, started: number): Promise<void> {
    const k = queue.keys[job.shard] as ShardKeys;
    if (outcome && ('retryAt' in outcome || 'retryInMs' in outcome)) {
      // retryAt is on Redis's clock: the job lands on it exactly (a periodic
      // job's next occurrence), whatever this worker's clock estimate; retryInMs
      // counts from when Redis takes the job back.
      let when: { at: number } | { delayMs: number };
      try {
        // Checked like a schedule's time: it becomes the job's due time and
        // names its due bucket. NaN, negative or too far is the handler's
        // bug: the job fails as if the handler threw, naming the time.
        const t = timeOf('retryAt' in outcome ? { at: outcome.retryAt } : { delayMs: outcome.retryInMs });
        when = t.timeKind === 'at' ? { at: t.time } : { delayMs: t.time };
      } catch (err) {
        await fail(job, err);
        return;
      }
      await runRelease(redis, k, [{ id: job.id, token: job.token }], when);
      return;
    }
    (acks[job.shard] as AckBatcher).add(job.id, job.token);
    emit({ kind: 'completed', job, durationMs: localNow() - started });
  }

  async function extend(c: Claimed, ms: number): Promise<boolean> {
    const { job } = c;
    const asked = localNow();
    const until = await runExtend(redis, queue.keys[job.shard] as ShardKeys, job.id, job.token, ms);
    if (until === null) {
      emit({ kind: 'stale', queue: queue.name, id: job.id, op: 'extend' });
      c.leaseUntil = Math.min(c.leaseUntil, localNow()); // lost: nothing left
    } else c.leaseUntil = asked + ms;
    return until !== null;
  }

  /** Dead jobs past the queue's retention go, a bounded number per sweep. */
  async function sweepDead(): Promise<void> {
    try {
      const removed = await queue.trimDead();
      if (removed > 0) log.info({ queue: queue.name, removed }, 'dead jobs past the retention removed');
    } catch (err) {
      log.warn({ err, queue: queue.name }, 'dead-set trim failed; trying again next sweep');
    }
  }

  /** Hands back every waiting job, attempts refunded. */
  async function releaseBuffered(): Promise<number> {
    const counts = await Promise.all([buffer, ...[...lanes.values()].map((l) => l.waiting)].map((w) => releaseWaiting(w, 0)));
    return counts.reduce((a, b) => a + b, 0);
  }

  /** Hands back the jobs of a waiting list from index `from` on, attempts refunded. */
  async function releaseWaiting(waiting: Claimed[], from: number): Promise<number> {
    const taken = waiting.splice(from);
    let released = 0;
    for (let shard = 0; shard < queue.keys.length; shard++) {
      const items = taken.filter((c) => c.job.shard === shard).map((c) => ({ id: c.job.id, token: c.job.token }));
      if (items.length === 0) continue;
      try {
        released += await runRelease(redis, queue.keys[shard] as ShardKeys, items);
      } catch (err) {
        log.error({ err, queue: queue.name, count: items.length }, 'release failed; jobs return after their lease');
      }
    }
    return released;
  }

  return {
    async start() {
      wake = await listenForWakeUps({
        redis,
        ...(o.subscriber && { subscriber: o.subscriber }),
        // A new head announces its due time.
        targets: queue.keys.map((k, shard) => {
          const poller = pollers[shard] as ShardPoller;
          return { channel: k.wake, wakeAt: (dueAt) => poller.wakeAt(clock.localAt(dueAt)), wakeNow: poller.wakeNow };
        }),
        idleRecheckMs,
        log,
      });
      deadSweep = setInterval(() => void sweepDead(), DEAD_SWEEP_EVERY_MS);
      deadSweep.unref();
      log.info({ queue: queue.name, shards: queue.shards, concurrency }, 'worker started');
    },

    stop() {
      // A second stop() (a test harness, a signal during shutdown) waits for the first.
      stopped ??= shutdownOnce();
      return stopped;
    },
  };

  async function shutdownOnce(): Promise<{ released: number; unfinished: number }> {
    stopping = true;
    if (deadSweep) clearInterval(deadSweep);
    await Promise.all(pollers.map((p) => p.stop()));
    const released = await releaseBuffered();
    await wake?.stop();
    const deadline = localNow() + graceMs;
    await settle(graceMs);
    const unfinished = runningJobs;
    if (unfinished > 0) {
      shutdown.abort(new Error('worker shutdown grace period ended'));
      log.warn({ queue: queue.name, unfinished }, 'handlers still running at shutdown; their jobs are released or return after the lease');
      await settle(ABORT_SETTLE_MS); // handlers that honour the signal hand their jobs back
    }
    await Promise.all(acks.map((a) => a.drain(Math.max(deadline, localNow() + 1_000))));
    log.info({ queue: queue.name, released, unfinished }, 'worker stopped');
    return { released, unfinished };
  }

  async function settle(ms: number): Promise<void> {
    let t: NodeJS.Timeout | undefined;
    await Promise.race([Promise.all([...running]), new Promise((r) => (t = setTimeout(r, ms)))]);
    clearTimeout(t);
  }
}

/** A lease length a handler asked for: whole ms, 1 ms to a day (Infinity would pin the job in flight for ever). */
function checkLease(ms: number): number {
  if (!Number.isSafeInteger(ms) || ms < 1 || ms > MAX_LEASE_MS) {
    throw new QueueInputError(QueueErrorCode.INVALID_OPTIONS, `a lease must be whole ms from 1 to ${MAX_LEASE_MS}: ${ms}`);
  }
  return ms;
}

function decodeOrFail(text: string): unknown {
  try {
    return decodePayload(text);
  } catch (err) {
    throw new NonRetryableError(`payload is not valid JSON: ${String(err)}`);
  }
}
