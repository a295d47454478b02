// The queue of one domain module, with the queue settings every module shares
// (key prefix, shards, payload limit) taken from the config.
import type { RedisClient } from './redis.js';
import type { Config } from '../config.js';
import { createQueue, type JobTypeOptions, type Queue, type ScheduleInput } from '../queue/index.js';
import { type Gatherer, createGatherer } from './gather.js';

/**
 * Retries of a domain job whose work is a database statement: a database
 * outage must not exhaust it, so up to 20 tries spread over about an hour.
 */
export const DATABASE_JOB_OPTIONS: JobTypeOptions = { maxAttempts: 20, backoff: { kind: 'exponential', baseMs: 500, maxMs: 5 * 60_000, jitter: 0.2 } };
/** A periodic pass: failed runs are retried by its own schedule, so it must practically never be dead-lettered. */
export const PERIODIC_JOB_OPTIONS: JobTypeOptions = { maxAttempts: 1_000 };

export type QueueConfig = Pick<
  Config,
  'QUEUE_PREFIX' | 'QUEUE_SHARDS' | 'QUEUE_RECORD_GROUPS' | 'QUEUE_MAX_PAYLOAD_BYTES' | 'QUEUE_DEAD_RETENTION_DAYS' | 'QUEUE_DEAD_MAX_PER_SHARD'
> &
  // Optional: absent, the engine's default bound (10 s).
  Partial<Pick<Config, 'QUEUE_PRIORITY_AGING_MS'>>;

export function createModuleQueue(redis: RedisClient, config: QueueConfig, name: string, types: Readonly<Record<string, JobTypeOptions>>): Queue {
  return createQueue(redis, {
    name,
    prefix: config.QUEUE_PREFIX,
    shards: config.QUEUE_SHARDS,
    recordGroups: config.QUEUE_RECORD_GROUPS === '1',
    maxPayloadBytes: config.QUEUE_MAX_PAYLOAD_BYTES,
    deadRetention: { maxAgeMs: config.QUEUE_DEAD_RETENTION_DAYS * 24 * 3_600_000, maxCount: config.QUEUE_DEAD_MAX_PER_SHARD },
    ...(config.QUEUE_PRIORITY_AGING_MS !== undefined && { priorityAgingMs: config.QUEUE_PRIORITY_AGING_MS }),
    types,
  });
}

/** Schedules submitted in one event-loop turn go to Redis in one scheduleMany call (at most `maxBatch` a call). */
export function gatherSchedules(queue: Queue, maxBatch: number): Gatherer<ScheduleInput, unknown> {
  return createGatherer<ScheduleInput, unknown>(async (jobs) => (await queue.scheduleMany(jobs)).map((value) => ({ ok: true, value })), maxBatch);
}
