// Groups items (parcels) per group (delivery area) in Redis and hands them out
// in batches: as soon as a group holds a full batch, or once its first item has
// waited the maximum time. A group may have a rule of its own (batch size,
// maximum wait), kept in Redis beside it; the options are the defaults.
// Domain-free: the caller names groups and items.
import {
  type DueBatch,
  type GroupRule,
  type TakenItem,
  decodeRule,
  runBatchAdd,
  runBatchRemove,
  runBatchRestore,
  runBatchTakeDue,
} from '../scripts/batch-scripts.js';
import { QueueErrorCode, QueueInputError } from '../errors.js';
import { BATCH_GROUP_PATTERN, type BatcherShardKeys, QUEUE_NAME_PATTERN, batcherKeys, shardOf } from '../keys.js';
import type { RedisClient } from '../scripts/scripts.js';
import { createServerClock, localNow } from '../wake/server-clock.js';

export type BatcherOptions = {
  readonly name: string;
  /** The batch size of a group without a rule of its own. */
  readonly batchSize: number;
  /** The maximum wait (ms) of a group without a rule of its own. */
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
  const defaults = { batchSize: o.batchSize, maxWaitMs: Math.round(o.maxWaitMs) };
  checkRule(defaults);
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
      const { taken, size, ...r } = await timed((deadline) => runBatchAdd(redis, k, group, item, defaults, at, deadline));
      return { ...r, batches: cut(taken, size) };
    },

    /** Takes the overdue groups of one shard (a bounded number); `late`: it reached Redis past its deadline and took nothing. */
    takeDue(shard: number, maxGroups = 100): Promise<{ now: number; late: boolean; nextDeadline: number | null; batches: DueBatch[] }> {
      return timed((deadline) => runBatchTakeDue(redis, keys[shard] as BatcherShardKeys, defaults, maxGroups, deadline));
    },

    /** Drops items that were batched another way, withdrawn, or moved to another group. */
    remove(group: string, items: readonly string[]): Promise<number> {
      return runBatchRemove(redis, keysOf(group), group, defaults, items);
    },

    /**
     * Puts items back with their arrival times (a batch whose commit failed,
     * what a commit left over, what Redis lost); an item already waiting keeps
     * its own. With `takeFull`, takes out and returns every full batch the
     * group then holds (to be committed as full batches). With `rule`, sets
     * the group's rule first (as setRule does; refused when the group holds
     * one of a later version).
     */
    async restore(group: string, items: readonly TakenItem[], opts: { takeFull?: boolean; rule?: GroupRule } = {}): Promise<{ batches: TakenItem[][] }> {
      const k = keysOf(group);
      if (opts.rule !== undefined) checkRule(opts.rule);
      else if (items.length === 0) return { batches: [] };
      const r = await runBatchRestore(redis, k, group, defaults, items, { takeFull: opts.takeFull ?? false, rule: opts.rule });
      return { batches: cut(r.taken, r.size) };
    },

    /**
     * Sets the group's own rule (a null part: the default; both null: none)
     * and applies it to what waits: the group's deadline moves with its
     * maximum wait (a flusher is woken when it is now the earliest, and takes
     * the group if it is due), and every full batch its batch size makes is
     * taken out and returned (to be committed as full batches). A rule of an
     * older version than the group's is refused: the group keeps its own.
     */
    async setRule(group: string, rule: GroupRule): Promise<{ batches: TakenItem[][] }> {
      const k = keysOf(group);
      checkRule(rule);
      const r = await runBatchRestore(redis, k, group, defaults, [], { takeFull: true, rule });
      return { batches: cut(r.taken, r.size) };
    },

    /**
     * The groups of one shard that have a rule of their own, with it (a
     * group back on both defaults, its version kept, has none).
     */
    async rules(shard: number): Promise<Map<string, GroupRule>> {
      const all = await redis.hgetall((keys[shard] as BatcherShardKeys).groupRules);
      const out = new Map<string, GroupRule>();
      for (const [group, value] of Object.entries(all)) {
        const rule = decodeRule(value);
        if (rule && (rule.batchSize !== null || rule.maxWaitMs !== null)) out.set(group, rule);
      }
      return out;
    },

    /** How many items of the group wait, since when, and until when (its deadline). */
    async waiting(group: string): Promise<{ count: number; firstArrival: number | null; deadline: number | null }> {
      const k = keysOf(group);
      const [count, first, deadline] = await Promise.all([
        redis.zcard(k.itemsPrefix + group),
        redis.zrange(k.itemsPrefix + group, 0, 0, 'WITHSCORES'),
        redis.zscore(k.groups, group),
      ]);
      return { count, firstArrival: first[1] === undefined ? null : Number(first[1]), deadline: deadline === null ? null : Number(deadline) };
    },
  };
}

/** Taken items (oldest first, a multiple of the batch size) as batches. */
function cut(taken: readonly TakenItem[], size: number): TakenItem[][] {
  const out: TakenItem[][] = [];
  for (let i = 0; i < taken.length; i += size) out.push(taken.slice(i, i + size));
  return out;
}

/** A size of 1 or more, a wait of 0 or more ms: whole numbers (they go into Redis as digits). */
function checkRule(rule: GroupRule): void {
  if (rule.batchSize !== null && (!Number.isInteger(rule.batchSize) || rule.batchSize < 1))
    throw new QueueInputError(QueueErrorCode.INVALID_OPTIONS, 'batch size must be a whole number >= 1');
  if (rule.maxWaitMs !== null && (!Number.isInteger(rule.maxWaitMs) || rule.maxWaitMs < 0))
    throw new QueueInputError(QueueErrorCode.INVALID_OPTIONS, 'maximum wait must be a whole number of ms >= 0');
  if (rule.version !== undefined && (!Number.isInteger(rule.version) || rule.version < 1))
    throw new QueueInputError(QueueErrorCode.INVALID_OPTIONS, 'rule version must be a whole number >= 1');
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
