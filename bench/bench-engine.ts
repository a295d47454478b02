// The one shape every queue takes in the benchmark, so every scenario runs the
// same code against our engine and its peers (BullMQ on Redis; pg-boss and
// graphile-worker on PostgreSQL).
import type { EngineName } from './bench-config.js';

/** Where a benchmark queue lives: enough for a child process to open the same queue. */
export type QueueIds = { readonly engine: EngineName; readonly name: string; readonly prefix: string };

/** Where the engines keep their jobs. */
export type BenchStores = { readonly redisUrl: string; readonly databaseUrl: string };

export type WorkerHooks = {
  /**
   * Called at the start of every handler with its lateness measured the same
   * way for both engines: wall clock at handler start minus the intended due
   * time (ms). `engineMs` is our worker's own estimate (Redis clock), if any.
   */
  onStart?(wallMs: number, engineMs?: number): void;
  /** Called once per job the engine reports completed. */
  onCompleted?(): void;
};

export type BenchWorker = {
  /** Begins claiming; connections are already open, so timing this measures dispatch only. */
  start(): Promise<void>;
  stop(): Promise<void>;
};

export type BenchQueue = {
  readonly ids: QueueIds;
  /** Where its jobs live: a Redis engine's memory figure also reads INFO used_memory. */
  readonly store: 'redis' | 'postgres';
  /** Connects and installs what the engine needs (schema, queue); awaited before any other call. */
  init(): Promise<void>;
  /**
   * What the queue's storage holds now: MEMORY USAGE summed over its keys
   * (Redis), or its tables with their indexes and TOAST (PostgreSQL).
   */
  storage(): Promise<{ objects: number; bytes: number }>;
  /** Adds jobs due `delayMs` after now (job n gets a business id derived from n). */
  addDelayed(jobs: readonly { n: number; delayMs: number }[]): Promise<void>;
  /** Adds jobs due at absolute times (ms since epoch). */
  addAt(jobs: readonly { n: number; dueAt: number }[]): Promise<void>;
  /** Adds jobs that are due at once. */
  addDue(ns: readonly number[]): Promise<void>;
  /** Jobs waiting (due or not), running, and unacknowledged. */
  counts(): Promise<{ waiting: number; active: number }>;
  /** `processes`: how many worker processes share the store in this scenario (a PostgreSQL peer sizes its pool by it). */
  prepareWorker(concurrency: number, hooks: WorkerHooks, processes?: number): Promise<BenchWorker>;
  /** Deletes every key (or the schema) of the queue. */
  drop(): Promise<void>;
  /** Closes connections (does not delete keys). */
  close(): Promise<void>;
};

export const businessId = (n: number): string => `order:${n}:expire`;
