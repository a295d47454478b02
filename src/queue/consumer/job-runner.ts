// Running one claimed job of a single handler: a lease that waited long is
// renewed first, the handler gets its context, and its answer is applied
// (done: acked in bulk; a time: handed back; a throw: the failure handler).
import type { AckBatcher } from './ack-batcher.js';
import type { LimitGate } from './limit-gate.js';
import { type Claimed, type ExtendLease, checkLease, leaseLeft } from './lease.js';
import { NonRetryableError } from '../errors.js';
import type { ShardKeys } from '../keys.js';
import { type Queue, decodePayload } from '../producer/queue.js';
import { timeOf } from '../producer/schedule-input.js';
import { type RedisClient, runRelease } from '../scripts/scripts.js';
import type { AnyJobHandler, Job, JobContext, JobOutcome, WorkerEvent } from '../types.js';
import { type ServerClock, localNow } from '../wake/server-clock.js';

export type JobRunnerOptions = {
  readonly queue: Queue;
  readonly redis: RedisClient;
  readonly handlers: Readonly<Record<string, AnyJobHandler>>;
  readonly leaseMs: number;
  readonly clock: ServerClock;
  /** Aborted when the worker's shutdown grace period ends. */
  readonly signal: AbortSignal;
  readonly acks: readonly AckBatcher[];
  readonly extend: ExtendLease;
  readonly fail: (job: Job, err: unknown) => Promise<void>;
  readonly emit: (e: WorkerEvent) => void;
  /** The queue limiter's gate; none: no limits. */
  readonly gate?: LimitGate | undefined;
};

export type JobRunner = {
  /** Runs one claimed job; false when it was not run (its lease was lost while it waited, or a rate limit handed it back). */
  run(c: Claimed): Promise<boolean>;
  /** The context a handler gets for one claimed job. */
  contextOf(c: Claimed): JobContext;
  /** A handler's answer for one job: handed back at the time it names, or done (acked in bulk). */
  applyOutcome(job: Job, outcome: void | JobOutcome, started: number): Promise<void>;
};

export function createJobRunner(o: JobRunnerOptions): JobRunner {
  const { queue, redis, leaseMs, clock, extend, fail, emit } = o;

  async function run(c: Claimed): Promise<boolean> {
    const { job } = c;
    // Over a rate limit: handed back to its turn before anything runs.
    if (o.gate && (await o.gate.admit([c])).length === 0) return false;
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
      await Promise.all([fail(job, err), o.gate?.signal(job, err)]);
      return true;
    }
    await applyOutcome(job, outcome, started);
    return true;
  }

  function contextOf(c: Claimed): JobContext {
    return {
      signal: o.signal,
      extendLease: async (ms) => extend(c, checkLease(ms ?? leaseMs)),
      leaseLeftMs: () => leaseLeft(c),
      leaseMs,
      now: clock.now,
    };
  }

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
    (o.acks[job.shard] as AckBatcher).add(job.id, job.token);
    emit({ kind: 'completed', job, durationMs: localNow() - started });
  }

  return { run, contextOf, applyOutcome };
}

/**
 * The job as its handler sees it: payload decoded. Throws (a
 * NonRetryableError) for a job that must not run: its payload unreadable, or
 * past its attempts (claims count attempts, so a job whose deliveries all
 * lost their lease, crashing or hanging their workers, arrives here past
 * its limit).
 */
export function runnable(job: Job): Job {
  if (job.attempts > job.maxAttempts) throw new NonRetryableError(`lease expired on each of ${job.maxAttempts} attempts; not run again`);
  return { ...job, payload: decodeOrFail(job.payload as string) };
}

function decodeOrFail(text: string): unknown {
  try {
    return decodePayload(text);
  } catch (err) {
    throw new NonRetryableError(`payload is not valid JSON: ${String(err)}`);
  }
}
