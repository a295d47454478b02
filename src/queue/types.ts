// Shapes shared across the engine's parts: a claimed job and the handler
// contract, a job type's options, what a lookup or a count of the queue
// answers, the logger the engine writes to and the events it reports.
import type { BackoffPolicy } from './backoff.js';

export type Job<P = unknown> = {
  readonly queue: string;
  readonly shard: number;
  readonly id: string;
  readonly type: string;
  readonly payload: P;
  /** This delivery's number, starting at 1. */
  readonly attempts: number;
  readonly maxAttempts: number;
  /**
   * This delivery is the job's last: if it fails, the job is dead-lettered
   * (attempts used up). The engine decides it; a handler that records the
   * outcome of an outside effect reads it here rather than recounting.
   */
  readonly lastAttempt: boolean;
  /** When the job was due (ms since epoch, Redis clock). */
  readonly dueAt: number;
  /** Fencing token of this delivery (its record's token). */
  readonly token: number;
};

export type JobContext = {
  /** Aborted when the worker's shutdown grace period runs out. */
  readonly signal: AbortSignal;
  /**
   * Renew this delivery's lease to `ms` from now (default: the worker's lease
   * length; whole ms, 1 ms to 24 h, else it throws). False when the lease was lost.
   */
  extendLease(ms?: number): Promise<boolean>;
  /**
   * How long this delivery's lease is surely held still, by this worker's
   * reckoning (ms, from when its claim or its last renewal that held was
   * asked; 0 or less: lost, or about to be). A handler about to start
   * something that must finish within the lease renews only when this is
   * too short.
   */
  leaseLeftMs(): number;
  /** The worker's lease length (ms): a long handler renews well within it. */
  readonly leaseMs: number;
  /**
   * The worker's estimate of the Redis clock (ms since epoch), the clock due
   * times are on. Use it, not Date.now(), to compute a `retryAt`: this host's
   * clock may be off from Redis's by more than the delay.
   */
  now(): number;
};

/**
 * What a handler may return besides nothing (done: ack): hand the job back to
 * run again later without counting a failure. `retryAt` is a time on Redis's
 * clock (ms since epoch; the job lands there exactly: a periodic job's next
 * occurrence); `retryInMs` a delay from when Redis takes it back (a business
 * deadline the database says is that far away, or a short wait for a row a
 * writer keeps changing).
 */
export type JobOutcome = { readonly retryAt: number } | { readonly retryInMs: number };

export type JobHandler = (job: Job, ctx: JobContext) => Promise<void | JobOutcome> | void | JobOutcome;

/** What a batch handler gets besides its jobs. */
export type BatchContext = Omit<JobContext, 'extendLease' | 'leaseLeftMs'> & {
  /** Renews every job's lease (see JobContext.extendLease); whether each is still held, in the jobs' order. */
  extendLeases(ms?: number): Promise<readonly boolean[]>;
  /** One job's own context (its own lease), for work the batch does job by job. */
  of(job: Job): JobContext;
};

/**
 * One job's outcome in a batch: nothing (done: ack), a JobOutcome (handed
 * back, no failure counted), or `{ error }`: failed as if a single handler had
 * thrown it (retried after the type's backoff; dead at once for a
 * NonRetryableError or on the last attempt).
 */
export type BatchOutcome = void | JobOutcome | { readonly error: unknown };

/**
 * A handler that takes up to `maxBatch` claimed jobs of its type at once (one
 * statement for all of them, say) and answers an outcome per job, in the
 * order given. Each job is still acked, handed back or failed on its own,
 * fenced by its own token. Throwing fails every job of the batch. The jobs
 * claimed while `concurrency` batches of the type run wait and go together
 * in the next one, so the batches grow with the load (no timer holds a job
 * back to fill one).
 */
export type JobBatchHandler = {
  readonly batch: (jobs: readonly Job[], ctx: BatchContext) => Promise<readonly BatchOutcome[]>;
  /** Most jobs in one call (default 100). */
  readonly maxBatch?: number;
  /** Calls of this type running at once (default 2), within the worker's concurrency. */
  readonly concurrency?: number;
};

/** What a worker runs for a job type: one job at a time, or a batch. */
export type AnyJobHandler = JobHandler | JobBatchHandler;

export type QueueLogger = {
  debug(obj: object, msg: string): void;
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
};

export const silentLogger: QueueLogger = { debug() {}, info() {}, warn() {}, error() {} };

export type WorkerEvent =
  | { readonly kind: 'claimed'; readonly queue: string; readonly count: number; readonly reclaimed: number }
  | { readonly kind: 'started'; readonly job: Job; readonly latenessMs: number }
  | { readonly kind: 'completed'; readonly job: Job; readonly durationMs: number }
  | { readonly kind: 'retried'; readonly job: Job; readonly retryAt: number; readonly error: string }
  | { readonly kind: 'dead'; readonly job: Job; readonly error: string }
  | { readonly kind: 'stale'; readonly queue: string; readonly id: string; readonly op: 'ack' | 'nack' | 'extend' };

export type JobTypeOptions = {
  /** Deliveries before the job goes to the dead set (default 5). */
  readonly maxAttempts?: number;
  readonly backoff?: BackoffPolicy;
  /**
   * The delivery endpoint a job calls (e.g. "webhook:<host>", "amqp:<exchange>"),
   * for the queue limiter's endpoint rules and slow-downs (queue/limits/). Given
   * the job with its payload decoded; null: none. Default: the job type is its
   * own endpoint ("<queue>/<type>").
   */
  readonly limitKey?: (job: Job) => string | null;
};

export type JobState = 'pending' | 'in_flight' | 'dead';

export type JobInfo = {
  readonly id: string;
  readonly state: JobState;
  readonly type: string;
  readonly payload: unknown;
  /** Deliveries so far. */
  readonly attempts: number;
  readonly maxAttempts: number;
  /** pending: when it is due; in_flight: null (see leaseUntil); dead: null (see diedAt). */
  readonly dueAt: number | null;
  readonly leaseUntil: number | null;
  readonly diedAt: number | null;
  readonly lastError: string | null;
  /** Pending, but set aside while its job type is paused (it runs after resume). */
  readonly parked: boolean;
  /** 0..9, higher claimed first among due jobs (ScheduleInput.priority); 5 unless given. */
  readonly priority: number;
};

export type QueueStats = {
  readonly queue: string;
  readonly shard: number | 'all';
  readonly pending: number;
  readonly dueNow: number;
  readonly inFlight: number;
  readonly dead: number;
  readonly nextDueAt: number | null;
  /** How long the oldest due job has waited past its due time (ms), 0 if none. */
  readonly oldestDueLagMs: number;
  /** Pending jobs set aside while their job type is paused (in pending, not in dueNow). */
  readonly parked: number;
  /** '*' when the whole queue is paused (in any shard), and the paused job types. */
  readonly paused: readonly string[];
};
