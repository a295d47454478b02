// Groups items (parcels) per group (delivery area) in Redis and hands them out
// in batches: as soon as a group holds a full batch, or once its first item has
// waited the maximum time. Domain-free: the caller names groups and items.
import { type DueBatch, type TakenItem, runBatchAdd, runBatchRemove, runBatchRestore, runBatchTakeDue } from './batch-scripts.js';
import { QueueErrorCode, QueueInputError } from './errors.js';
import { BATCH_GROUP_PATTERN, type BatcherShardKeys, QUEUE_NAME_PATTERN, batcherKeys, shardOf } from './keys.js';
import type { RedisClient } from './scripts.js';

export type BatcherOptions = {
  readonly name: string;
  readonly batchSize: number;
  readonly maxWaitMs: number;
  /** Shards (group name hash mod shards), each on its own hash tag. Default 1. */
  readonly shards?: number;
  /** Key prefix, default "bq". */
  readonly prefix?: string;
};

const MAX_ITEM_LENGTH = 256;
const CONTROL_CHARS = /[\u0000-\u001f\u007f]/;

export type Batcher = ReturnType<typeof createBatcher>;

export function createBatcher(redis: RedisClient, o: BatcherOptions) {
  const shards = o.shards ?? 1;
  if (!QUEUE_NAME_PATTERN.test(o.name)) throw new QueueInputError(QueueErrorCode.INVALID_OPTIONS, `batcher name must match ${QUEUE_NAME_PATTERN}`);
  if (!Number.isInteger(o.batchSize) || o.batchSize < 1) throw new QueueInputError(QueueErrorCode.INVALID_OPTIONS, 'batch size must be >= 1');
  const keys = Array.from({ length: shards }, (_, s) => batcherKeys(o.prefix ?? 'bq', o.name, s));
  const keysOf = (group: string): BatcherShardKeys => {
    checkGroup(group);
    return keys[shardOf(group, shards)] as BatcherShardKeys;
  };

  return {
    name: o.name,
    batchSize: o.batchSize,
    maxWaitMs: o.maxWaitMs,
    keys: keys as readonly BatcherShardKeys[],

    /**
     * Adds an item; returns the batch it completed, if it did. Adding a waiting
     * item again changes nothing. `arrivedAt` (ms since epoch) is when the
     * caller's source of truth saw it arrive; default: the Redis clock's now.
     */
    async add(group: string, item: string, arrivedAt?: number): Promise<{ added: boolean; waiting: number; taken: TakenItem[] }> {
      const k = keysOf(group);
      checkItem(item);
      if (arrivedAt !== undefined && !Number.isFinite(arrivedAt)) throw new QueueInputError(QueueErrorCode.INVALID_DUE_TIME, 'arrival must be a finite time in ms');
      return runBatchAdd(redis, k, group, item, o.batchSize, arrivedAt === undefined ? undefined : Math.floor(arrivedAt));
    },

    /** Takes the overdue groups of one shard (a bounded number). */
    takeDue(shard: number, maxGroups = 100): Promise<{ now: number; nextFirstArrival: number | null; batches: DueBatch[] }> {
      return runBatchTakeDue(redis, keys[shard] as BatcherShardKeys, o.maxWaitMs, maxGroups, o.batchSize);
    },

    /** Drops items that were batched another way. */
    remove(group: string, items: readonly string[]): Promise<number> {
      return runBatchRemove(redis, keysOf(group), group, items);
    },

    /** Puts back a taken batch whose commit failed, with the original arrival times. */
    restore(group: string, items: readonly TakenItem[]): Promise<void> {
      return runBatchRestore(redis, keysOf(group), group, items);
    },

    /** How many items of the group wait, and since when. */
    async waiting(group: string): Promise<{ count: number; firstArrival: number | null }> {
      const k = keysOf(group);
      const [count, first] = await Promise.all([redis.zcard(k.itemsPrefix + group), redis.zscore(k.groups, group)]);
      return { count, firstArrival: first === null ? null : Number(first) };
    },
  };
}

function checkGroup(group: string): void {
  if (!BATCH_GROUP_PATTERN.test(group)) {
    throw new QueueInputError(QueueErrorCode.INVALID_OPTIONS, `group name must match ${BATCH_GROUP_PATTERN}`);
  }
}

function checkItem(item: string): void {
  if (item.length === 0 || item.length > MAX_ITEM_LENGTH || CONTROL_CHARS.test(item)) {
    throw new QueueInputError(QueueErrorCode.INVALID_JOB_ID, `item must be 1..${MAX_ITEM_LENGTH} characters without control characters`);
  }
}
