// Batch job types: claimed jobs of a type wait in its lane and go together in
// one handler call (up to maxBatch), at most `concurrency` calls of it at once;
// each job's outcome is then applied on its own, fenced by its own token.
import { type JobRunner, runnable } from './job-runner.js';
import type { LimitGate } from './limit-gate.js';
import { type Claimed, type ExtendLease, checkLease, leaseLeft } from './lease.js';
import type { Queue } from '../producer/queue.js';
import type { AnyJobHandler, BatchContext, BatchOutcome, Job, JobBatchHandler, WorkerEvent } from '../types.js';
import { type ServerClock, localNow } from '../wake/server-clock.js';

/** A batch job type's waiting jobs and its calls running now. */
export type BatchLane = { readonly handler: JobBatchHandler; readonly max: number; readonly limit: number; waiting: Claimed[]; running: number };

const DEFAULT_MAX_BATCH = 100;
const DEFAULT_BATCH_CONCURRENCY = 2;

/** A lane per batch job type; throws for a type with no usable handler, or a batch handler's bad limits. */
export function batchLanesOf(queue: Queue, handlers: Readonly<Record<string, AnyJobHandler>>): Map<string, BatchLane> {
  const lanes = new Map<string, BatchLane>();
  for (const type of queue.types) {
    const h = handlers[type];
    if (typeof h === 'function') continue;
    if (typeof h?.batch !== 'function') throw new Error(`worker for queue ${queue.name} has no handler for ${type}`);
    const max = h.maxBatch ?? DEFAULT_MAX_BATCH;
    const limit = h.concurrency ?? DEFAULT_BATCH_CONCURRENCY;
    if (!Number.isSafeInteger(max) || max < 1 || !Number.isSafeInteger(limit) || limit < 1) {
      throw new Error(`batch handler for ${type}: maxBatch and concurrency must be whole numbers from 1`);
    }
    lanes.set(type, { handler: h, max, limit, waiting: [], running: 0 });
  }
  return lanes;
}

/** Runs claimed jobs of one batch type in one call; resolves to how many were run (not lost while they waited). */
export type RunBatch = (type: string, handler: JobBatchHandler, claimed: readonly Claimed[]) => Promise<number>;

export type BatchRunnerOptions = {
  readonly leaseMs: number;
  readonly clock: ServerClock;
  /** Aborted when the worker's shutdown grace period ends. */
  readonly signal: AbortSignal;
  readonly runner: JobRunner;
  readonly extend: ExtendLease;
  readonly fail: (job: Job, err: unknown) => Promise<void>;
  readonly emit: (e: WorkerEvent) => void;
  /** The queue limiter's gate; none: no limits. */
  readonly gate?: LimitGate | undefined;
};

/** Started jobs of a call: those its handler gets, the claim behind each, and the failures of those that must not run. */
type Started = { readonly jobs: Job[]; readonly leases: Map<Job, Claimed>; readonly failures: Promise<void>[] };

export function createBatchRunner(o: BatchRunnerOptions): RunBatch {
  const { leaseMs, clock, runner, extend, fail, emit } = o;

  /**
   * Every job's lease held (renewed first if it waited long), each outcome
   * then applied to its own job, fenced by its own token, as a single
   * handler's answer is.
   */
  async function runBatch(type: string, handler: JobBatchHandler, all: readonly Claimed[]): Promise<number> {
    // Those over a rate limit are handed back to their turn, not run.
    const claimed = o.gate ? await o.gate.admit(all) : all;
    const { jobs, leases, failures } = start(claimed, await renewWaited(claimed));
    const ran = jobs.length + failures.length;
    if (jobs.length === 0) {
      await Promise.all(failures);
      return ran;
    }
    const started = localNow();
    const ctx = contextOf(jobs, leases);
    let outcomes: readonly BatchOutcome[];
    try {
      outcomes = checked(type, jobs, await handler.batch(jobs, ctx));
    } catch (err) {
      await Promise.all([...failures, ...jobs.map((j) => fail(j, err)), signal(jobs, leases, err)]);
      return ran;
    }
    await Promise.all([
      ...failures,
      ...jobs.map((j, i) => {
        const outcome = outcomes[i];
        if (!outcome || !('error' in outcome)) return runner.applyOutcome(j, outcome, started);
        return Promise.all([fail(j, outcome.error), signal([j], leases, outcome.error)]);
      }),
    ]);
    return ran;
  }

  /** A receiver's "slow down" to the gate, with the jobs as claimed (its endpoint is read from the claimed record). */
  async function signal(jobs: readonly Job[], leases: ReadonlyMap<Job, Claimed>, err: unknown): Promise<void> {
    const gate = o.gate;
    if (gate) await Promise.all(jobs.map((j) => gate.signal((leases.get(j) as Claimed).job, err)));
  }

  /** Whether each job's lease holds, renewing those that waited for much of it. */
  function renewWaited(claimed: readonly Claimed[]): Promise<boolean[]> {
    // A renewal that fails (a Redis hiccup) drops only its own job: it returns after its lease.
    return Promise.all(claimed.map(async (c) => (leaseLeft(c) < leaseMs / 2 ? extend(c, leaseMs).catch(() => false) : true)));
  }

  function start(claimed: readonly Claimed[], held: readonly boolean[]): Started {
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
    return { jobs, leases, failures };
  }

  function contextOf(jobs: readonly Job[], leases: ReadonlyMap<Job, Claimed>): BatchContext {
    return {
      signal: o.signal,
      extendLeases: async (ms) => {
        const until = checkLease(ms ?? leaseMs);
        return Promise.all(jobs.map((j) => extend(leases.get(j)!, until)));
      },
      of: (job) => {
        const c = leases.get(job);
        if (!c) throw new Error(`job ${job.id} is not of this batch`);
        return runner.contextOf(c);
      },
      leaseMs,
      now: clock.now,
    };
  }

  return runBatch;
}

/** A call's answer, checked whole before any is applied: a malformed answer fails every job, never half the batch. */
function checked(type: string, jobs: readonly Job[], outcomes: readonly BatchOutcome[]): readonly BatchOutcome[] {
  if (!Array.isArray(outcomes) || outcomes.length !== jobs.length) {
    throw new Error(`batch handler for ${type} answered ${Array.isArray(outcomes) ? outcomes.length : 'no'} outcomes for ${jobs.length} jobs`);
  }
  const bad = outcomes.findIndex((x) => x !== undefined && (typeof x !== 'object' || x === null));
  if (bad >= 0) throw new Error(`batch handler for ${type} answered ${String(outcomes[bad])} for job ${jobs[bad]?.id}`);
  return outcomes;
}
