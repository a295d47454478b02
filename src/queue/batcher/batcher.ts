// Groups items (parcels) per group (delivery area) in Redis and hands them out
// in batches: as soon as a group holds a full batch, or once its first item has
// waited the maximum time. Domain-free: the caller names groups and items.
import { type DueBatch, type TakenItem, runBatchAdd, runBatchRemove, runBatchRestore, runBatchTakeDue } from '../scripts/batch-scripts.js';
import { QueueErrorCode, QueueInputError } from '../errors.js';
import { BATCH_GROUP_PATTERN, type BatcherShardKeys, QUEUE_NAME_PATTERN, batcherKeys, shardOf } from '../keys.js';
import type { RedisClient } from '../scripts/scripts.js';
import { createServerClock, localNow } from '../wake/server-clock.js';

export type BatcherOptions = {
  readonly name: string;
  readonly batchSize: number;
  readonly maxWaitMs: number;
  /** Shards (group name hash mod shards), each on its own hash tag. Default 1. */
  readonly shards?: number;
  /** Key prefix, default "bq". */
  readonly prefix?: string;
  /**
   * A call that reaches Redis this long (ms) after it was made changes nothing
   * there (a server that hung runs it when it wakes, after its caller gave up).
   * Keep it well below the caller's own timeout (the answer's way back and the
   * clock estimate's error). Default 600 ms.
   */
  readonly deadlineMs?: number;
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
  // The Redis clock as this process sees it, for the calls' deadlines: sampled by every add and take.
  const clock = createServerClock();
  const deadlineMs = o.deadlineMs ?? 600;
  const timed = async <R extends { now: number; late: boolean }>(run: (deadline: number) => Promise<R>): Promise<R> => {
    const t0 = localNow();
    const r = await run(clock.now() + deadlineMs);
    clock.sample(r.now, t0, localNow(), r.late);
    return r;
  };

  return {
    name: o.name,
    batchSize: o.batchSize,
    maxWaitMs: o.maxWaitMs,
    keys: keys as readonly BatcherShardKeys[],
    /** This process's estimate of the Redis clock. */
    clock,

    /**
     * Adds an item; returns the full batches it completed (one, or several
     * after a restore put many back). Adding a waiting item again changes
     * nothing. `arrivedAt` (ms since epoch) is when the caller's source of
     * truth saw it arrive; default: the Redis clock's now. `late`: the call
     * reached Redis past its deadline and changed nothing.
     */
    async add(group: string, item: string, arrivedAt?: number): Promise<{ late: boolean; added: boolean; waiting: number; batches: TakenItem[][] }> {
      const k = keysOf(group);
      checkItem(item);
      if (arrivedAt !== undefined && !Number.isFinite(arrivedAt))
        throw new QueueInputError(QueueErrorCode.INVALID_DUE_TIME, 'arrival must be a finite time in ms');
      const at = arrivedAt === undefined ? undefined : Math.floor(arrivedAt);
      const { taken, ...r } = await timed((deadline) => runBatchAdd(redis, k, group, item, o.batchSize, at, deadline));
      return { ...r, batches: cut(taken, o.batchSize) };
    },

    /** Takes the overdue groups of one shard (a bounded number); `late`: it reached Redis past its deadline and took nothing. */
    takeDue(shard: number, maxGroups = 100): Promise<{ now: number; late: boolean; nextFirstArrival: number | null; batches: DueBatch[] }> {
      return timed((deadline) => runBatchTakeDue(redis, keys[shard] as BatcherShardKeys, o.maxWaitMs, maxGroups, o.batchSize, deadline));
    },

    /** Drops items that were batched another way. */
    remove(group: string, items: readonly string[]): Promise<number> {
      return runBatchRemove(redis, keysOf(group), group, items);
    },

    /**
     * Puts items back with their arrival times (a batch whose commit failed,
     * what a commit left over, what Redis lost); an item already waiting keeps
     * its own. With `takeFull`, takes out and returns every full batch the
     * group then holds (to be committed as full batches).
     */
    async restore(group: string, items: readonly TakenItem[], opts: { takeFull?: boolean } = {}): Promise<{ batches: TakenItem[][] }> {
      const r = await runBatchRestore(redis, keysOf(group), group, items, opts.takeFull ? o.batchSize : null);
      return { batches: cut(r.taken, o.batchSize) };
    },

    /** How many items of the group wait, and since when. */
    async waiting(group: string): Promise<{ count: number; firstArrival: number | null }> {
      const k = keysOf(group);
      const [count, first] = await Promise.all([redis.zcard(k.itemsPrefix + group), redis.zscore(k.groups, group)]);
      return { count, firstArrival: first === null ? null : Number(first) };
    },
  };
}

/** Taken items (oldest first, a multiple of the batch size) as batches. */
function cut(taken: readonly TakenItem[], size: number): TakenItem[][] {
  const out: TakenItem[][] = [];
  for (let i = 0; i < taken.length; i += size) out.push(taken.slice(i, i + size));
  return out;
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
