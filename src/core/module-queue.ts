// The queue of one domain module, with the queue settings every module shares
// (key prefix, shards, payload limit) taken from the config.
import type { RedisClient } from './redis.js';
import type { Config } from '../config.js';
import { createQueue, type JobTypeOptions, type Queue } from '../queue/queue.js';

export type QueueConfig = Pick<Config, 'QUEUE_PREFIX' | 'QUEUE_SHARDS' | 'QUEUE_MAX_PAYLOAD_BYTES'>;

export function createModuleQueue(
  redis: RedisClient,
  config: QueueConfig,
  name: string,
  types: Readonly<Record<string, JobTypeOptions>>,
): Queue {
  return createQueue(redis, {
    name,
    prefix: config.QUEUE_PREFIX,
    shards: config.QUEUE_SHARDS,
    maxPayloadBytes: config.QUEUE_MAX_PAYLOAD_BYTES,
    types,
  });
}
