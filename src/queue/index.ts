// The delay-queue engine's one public entry: what domain modules, the
// composition root and core/ may use. Everything else under src/queue/ is the
// engine's own (README.md beside this file draws a job's path through it).

// Producer and operator side: schedule, move, cancel, look up, dead letters.
export {
  DEFAULT_MAX_ATTEMPTS,
  type DeadRetention,
  type JobInfo,
  type JobState,
  type JobTypeOptions,
  type PauseState,
  type Queue,
  type QueueOptions,
  type QueueStats,
  type ScheduleInput,
  type ScheduleMode,
  type ScheduleResult,
  type When,
  createQueue,
  decodePayload,
} from './producer/queue.js';
// Consumer side: workers, the handler contract, errors a handler may throw.
export { type Worker, type WorkerOptions, createWorker } from './consumer/worker.js';
export type { BackoffPolicy } from './backoff.js';
export {
  type AnyJobHandler,
  type BatchContext,
  type BatchOutcome,
  type Job,
  type JobBatchHandler,
  type JobContext,
  type JobHandler,
  type JobOutcome,
  type QueueLogger,
  type WorkerEvent,
  silentLogger,
} from './types.js';
export { NonRetryableError, QueueErrorCode, QueueInputError, ReceiverBusyError } from './errors.js';
// Periodic jobs on the queue.
export { type PeriodicJob, type Schedule, checkSchedule, periodicHandler, startPeriodicKeeper } from './periodic/periodic.js';
// Grouping items into batches by size or wait (parcels per area).
export { type Batcher, type BatcherOptions, createBatcher } from './batcher/batcher.js';
export { type BatchHandler, createBatchFlusher } from './batcher/batch-flusher.js';
export type { DueBatch, GroupRule, TakenItem } from './scripts/batch-scripts.js';
export { BATCH_GROUP_PATTERN, batcherKeys, batcherPrefix } from './keys.js';
// Rate limits on the engine's connection (core/rate-limit.ts): one script call judges a run of decisions.
export { type RateDecision, runDistinct, runGcra } from './scripts/limit-scripts.js';
// Outbound rate limits of the queues (per queue, job type and endpoint; slow-downs on 429/503).
export {
  type AdaptiveOptions,
  DEFAULT_ADAPTIVE,
  type QueueLimiter,
  RULES_LOADED_FIELD,
  type Slowed,
  createQueueLimiter,
  halvingsAt,
  ruleField,
  slowDownOver,
} from './limits/queue-limiter.js';
export { type Limit, type LimitRule, checkLimit, formatLimit, parseLimit, parseRules, scopeProblem } from './limits/limit-rules.js';
// Telemetry and start-up checks.
export { LATENESS_BUCKETS_MS, createLatenessRecorder } from './telemetry/lateness-recorder.js';
export { type LatenessReader, createLatenessReader } from './telemetry/lateness-reader.js';
export { checkEvictionPolicy } from './checks/eviction-check.js';
export { QueueLayoutError, checkQueueLayout } from './checks/layout-check.js';
// Changing a queue's shard count while the service runs.
export { ReshardError, type ReshardOptions, type ReshardResult, reshard } from './producer/reshard.js';
// The connection the engine runs on, and bounding a call in time.
export { type RedisClient, isCluster, masters, subscriberOf } from './redis-client.js';
export { TimeoutError, withTimeout } from './timeout.js';
