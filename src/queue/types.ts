// Shapes shared by the worker's parts: a claimed job, the handler contract,
// the logger the engine writes to and the events it reports for metrics.

export type Job<P = unknown> = {
  readonly queue: string;
  readonly shard: number;
  readonly id: string;
  readonly type: string;
  readonly payload: P;
  /** This delivery's number, starting at 1. */
  readonly attempts: number;
  readonly maxAttempts: number;
  /** When the job was due (ms since epoch, Redis clock). */
  readonly dueAt: number;
  /** Fencing token of this delivery (the record's generation). */
  readonly token: number;
};

export type JobContext = {
  /** Aborted when the worker's shutdown grace period runs out. */
  readonly signal: AbortSignal;
  /** Renew this delivery's lease (default: the worker's lease length). False when the lease was lost. */
  extendLease(ms?: number): Promise<boolean>;
  /** The worker's lease length (ms): a long handler renews well within it. */
  readonly leaseMs: number;
};

/**
 * What a handler may return besides nothing (done: ack). `retryAt` hands the
 * job back to run again at that time (ms since epoch, on Redis's clock: it
 * lands there exactly) without counting a failure: for a business deadline
 * not yet passed by the database's clock, or a periodic job's next run.
 */
export type JobOutcome = { readonly retryAt: number };

export type JobHandler = (job: Job, ctx: JobContext) => Promise<void | JobOutcome> | void | JobOutcome;

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
