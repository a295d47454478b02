// The producer and operator side of one delay queue: schedule, reschedule and
// cancel by id, look jobs up, count them, redrive or delete dead jobs, and
// pause or resume. Each role is a part of its own (scheduling.ts, lookups.ts,
// dead-letters.ts, ungroup.ts, controls.ts) over the options checked once (queue-options.ts); this file
// puts them together into the one Queue the rest of the engine is given.
import type { ShardKeys } from '../keys.js';
import type { RedisClient } from '../redis-client.js';
import { createControls } from './controls.js';
import { createDeadLetters } from './dead-letters.js';
import { createLookups } from './lookups.js';
import type { Job } from '../types.js';
import { type QueueOptions, backoffOf, endpointOf, maxAttemptsOf, resolveQueueOptions } from './queue-options.js';
import { createScheduling } from './scheduling.js';
import { ungroupRecords } from './ungroup.js';

export type { JobInfo, JobState, JobTypeOptions, QueueStats } from '../types.js';
export { DEFAULT_DEAD_RETENTION, DEFAULT_MAX_ATTEMPTS, type DeadRetention, type QueueOptions } from './queue-options.js';
export type { ScheduleInput, ScheduleMode, ScheduleResult, When } from './schedule-input.js';
export { decodePayload } from './schedule-input.js';
export type { PauseState } from './controls.js';

export type Queue = ReturnType<typeof createQueue>;

export function createQueue(redis: RedisClient, options: QueueOptions) {
  const q = resolveQueueOptions(redis, options);
  const scheduledListeners: ((count: number) => void)[] = [];
  const announce = (count: number) => {
    if (count > 0) for (const l of scheduledListeners) l(count);
  };
  const { schedule, scheduleMany, reschedule, cancel } = createScheduling(q, announce);
  const { get, stats, shardStats, overview } = createLookups(q);
  const { redrive, redriveAll, deleteDead, trimDead, listDead } = createDeadLetters(q, get);
  const { pause, resume, pauseState, unparkResumed } = createControls(q);

  return {
    name: q.name,
    prefix: q.prefix,
    shards: q.shards,
    keys: q.keys as readonly ShardKeys[],
    /** The shards in use (stored count, or a change of it in progress); workers poll every one it names. */
    layout: q.layout,
    /** The starvation bound of priorities (ms): the workers' claims pass it (lua/queue/claim.lua). */
    priorityAgingMs: q.priorityAgingMs,
    maxAttemptsOf: (type: string, override: number | undefined): number => maxAttemptsOf(options.types, type, override),
    backoffOf: (type: string) => backoffOf(options.types, type),
    /** The endpoint a job (payload decoded) calls, for the queue limiter (queue-options.ts). */
    endpointOf: (job: Job) => endpointOf(q.name, options.types, job),
    types: Object.keys(options.types),
    schedule,
    scheduleMany,
    reschedule,
    cancel,
    get,
    stats,
    shardStats,
    overview,
    redrive,
    redriveAll,
    deleteDead,
    ungroup: (): Promise<number> => ungroupRecords(redis, q.keys),
    trimDead,
    listDead,
    pause,
    resume,
    pauseState,
    unparkResumed,
    /** Calls `listener` with the number of jobs each schedule call created or moved (for metrics). */
    onScheduled(listener: (count: number) => void): void {
      scheduledListeners.push(listener);
    },
  };
}
