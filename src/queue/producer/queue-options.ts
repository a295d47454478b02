// A queue's options, checked and resolved once: the defaults, the shards'
// keys, and what a job type's options say (attempts, retry spacing). Every
// other part of the producer takes the resolved QueueSetup.
import { type BackoffPolicy, DEFAULT_BACKOFF } from '../backoff.js';
import { invalidOptions } from '../errors.js';
import { QUEUE_NAME_PATTERN, type ShardKeys } from '../keys.js';
import type { RedisClient } from '../redis-client.js';
import { type ShardLayout, createShardLayout } from '../shard-layout.js';
import { JOB_TYPE_PATTERN } from '../record.js';
import { DEFAULT_PRIORITY_AGING_MS } from '../scripts/scripts.js';
import type { Job, JobTypeOptions } from '../types.js';
import { checkMaxAttempts } from './schedule-input.js';

export type QueueOptions = {
  readonly name: string;
  /** Job types this queue accepts; scheduling any other type is an error. */
  readonly types: Readonly<Record<string, JobTypeOptions>>;
  /** Shards (job id hash mod shards), each on its own hash tag. Default 1. */
  readonly shards?: number;
  /**
   * Whether new job records go to the shard's record groups or (default) to
   * its one jobs HASH, the only place builds before the groups read them
   * (lua/lib/records.lua). Records are found in either place whatever this
   * says. The service passes QUEUE_RECORD_GROUPS (0 by default in this release).
   */
  readonly recordGroups?: boolean;
  /** Key prefix, default "dq". */
  readonly prefix?: string;
  /** Largest accepted payload after JSON encoding, in bytes. Default 64 KiB. */
  readonly maxPayloadBytes?: number;
  /** How long dead jobs are kept, and how many at most per shard (the oldest go first). Default 7 days, 100 000. */
  readonly deadRetention?: DeadRetention;
  /**
   * The starvation bound of job priorities (ms): a job due longer ago than
   * this is claimed ahead of priority, oldest first. Default 10 s.
   */
  readonly priorityAgingMs?: number;
};

export type DeadRetention = { readonly maxAgeMs: number; readonly maxCount: number };
export const DEFAULT_DEAD_RETENTION: DeadRetention = { maxAgeMs: 7 * 24 * 3_600_000, maxCount: 100_000 };

export const DEFAULT_MAX_ATTEMPTS = 5;

/** A queue's options with the defaults filled in, and its shards' keys. */
export type QueueSetup = {
  readonly redis: RedisClient;
  readonly name: string;
  readonly shards: number;
  readonly prefix: string;
  readonly maxPayloadBytes: number;
  readonly deadRetention: DeadRetention;
  readonly recordGroups: boolean;
  readonly priorityAgingMs: number;
  readonly types: Readonly<Record<string, JobTypeOptions>>;
  /** Every shard the layout has named (grows when a change of the shard count adds shards). */
  readonly keys: ShardKeys[];
  /** The shards in use now: the stored count, or a change of it in progress (shard-layout.ts). */
  readonly layout: ShardLayout;
};

/** Refuses a bad name, shard count, job type or attempt limit before any key is built. */
export function resolveQueueOptions(redis: RedisClient, options: QueueOptions): QueueSetup {
  const name = options.name;
  const shards = options.shards ?? 1;
  const prefix = options.prefix ?? 'dq';
  const maxPayloadBytes = options.maxPayloadBytes ?? 64 * 1024;
  const deadRetention = options.deadRetention ?? DEFAULT_DEAD_RETENTION;
  const recordGroups = options.recordGroups ?? false;
  const priorityAgingMs = options.priorityAgingMs ?? DEFAULT_PRIORITY_AGING_MS;
  if (!Number.isInteger(priorityAgingMs) || priorityAgingMs < 0 || priorityAgingMs > 86_400_000) {
    invalidOptions(`priorityAgingMs must be an integer 0..86400000: ${priorityAgingMs}`);
  }
  if (!QUEUE_NAME_PATTERN.test(name)) invalidOptions(`queue name must match ${QUEUE_NAME_PATTERN}: ${name}`);
  if (!Number.isInteger(shards) || shards < 1 || shards > 1024) invalidOptions(`shards must be 1..1024: ${shards}`);
  for (const [type, t] of Object.entries(options.types)) {
    if (!JOB_TYPE_PATTERN.test(type)) invalidOptions(`job type must match ${JOB_TYPE_PATTERN}: ${type}`);
    if (t.maxAttempts !== undefined) checkMaxAttempts(t.maxAttempts);
  }
  const layout = createShardLayout(redis, prefix, name, shards);
  const keys = layout.keys;
  return { redis, name, shards, prefix, maxPayloadBytes, deadRetention, recordGroups, priorityAgingMs, types: options.types, keys, layout };
}

/** A job's attempt limit: its own, else its type's, else the default. */
export function maxAttemptsOf(types: QueueOptions['types'], type: string, override: number | undefined): number {
  return override ?? types[type]?.maxAttempts ?? DEFAULT_MAX_ATTEMPTS;
}

/**
 * The delivery endpoint of a job (its payload decoded), by its type's
 * `limitKey`; a type without one is its own endpoint ("<queue>/<type>").
 * Null: the job calls no endpoint (or its type's limitKey said so).
 */
export function endpointOf(queue: string, types: QueueOptions['types'], job: Job): string | null {
  const limitKey = types[job.type]?.limitKey;
  return limitKey ? limitKey(job) : `${queue}/${job.type}`;
}

/** A job type's retry spacing, else the default. */
export function backoffOf(types: QueueOptions['types'], type: string): BackoffPolicy {
  return types[type]?.backoff ?? DEFAULT_BACKOFF;
}
