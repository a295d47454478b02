// Which shards a queue's jobs live in, as every process sees it: the stored
// shard count, or a change of it in progress (producer/reshard.ts), re-read
// from Redis at most once a second (and at once when a worker hears a change
// announced). Producers write and look jobs up by it; workers poll every shard
// it names. The keys list only grows, so a job claimed from a shard keeps its
// keys until its ack.
import { type ShardKeys, reshardKey, shardCountKey, shardKeys, shardOf } from './keys.js';
import type { RedisClient } from './redis-client.js';
import { localNow } from './wake/server-clock.js';

/**
 * steady: jobs are spread by hash mod `to` (= `from`). poll: a change to `to`
 * began; workers poll both layouts' shards, producers still write by `from`.
 * move: producers write by `to`, find jobs by both; the mover empties the old
 * places. epoch: raised as a change enters 'move'; the mover fences every
 * shard with it first, and a shard refuses writes that carry an older one
 * (lua/queue/schedule.lua, cancel.lua), so no process still writing by the
 * old count can put a job in its old shard once another writes by the new.
 */
export type Layout = { readonly from: number; readonly to: number; readonly phase: 'steady' | 'poll' | 'move'; readonly epoch: number };

/** The longest a process acts on a layout it read: the mover waits past it between phases. */
export const LAYOUT_REFRESH_MS = 1_000;

/** A wake-channel message that means "the layout changed: read it again" (due times are positive, a pause is -1). */
export const LAYOUT_CHANGED = -2;

export type ShardLayout = {
  /** Every shard any layout this process read names (grows only). */
  readonly keys: ShardKeys[];
  /** The layout, read again when older than LAYOUT_REFRESH_MS (or `force`). */
  fresh(force?: boolean): Promise<Layout>;
  /** The layout last read (the configured count until the first read). */
  readonly current: Layout;
};

export function parseLayout(count: string | null, move: Readonly<Record<string, string>>, configured: number): Layout {
  const from = Number(move.from);
  const to = Number(move.to);
  const epoch = Number(move.epoch ?? 0);
  if (from > 0 && to > 0 && (move.phase === 'poll' || move.phase === 'move')) return { from, to, phase: move.phase, epoch };
  const n = count === null ? configured : Number(count);
  return { from: n, to: n, phase: 'steady', epoch };
}

export function createShardLayout(redis: RedisClient, prefix: string, name: string, configured: number): ShardLayout {
  const keys: ShardKeys[] = [];
  let current: Layout = { from: configured, to: configured, phase: 'steady', epoch: 0 };
  let readAt = Number.NEGATIVE_INFINITY;
  let reading: Promise<Layout> | null = null;
  const grow = (n: number) => {
    for (let s = keys.length; s < n; s++) keys.push(shardKeys(prefix, name, s));
  };
  grow(configured);

  async function read(): Promise<Layout> {
    const t0 = localNow();
    const [count, move] = await Promise.all([redis.get(shardCountKey(prefix, name)), redis.hgetall(reshardKey(prefix, name))]);
    current = parseLayout(count, move, configured);
    grow(Math.max(current.from, current.to));
    readAt = t0;
    return current;
  }

  return {
    keys,
    get current() {
      return current;
    },
    fresh(force = false) {
      if (!force && localNow() - readAt < LAYOUT_REFRESH_MS) return Promise.resolve(current);
      reading ??= read().finally(() => {
        reading = null;
      });
      return reading;
    },
  };
}

/**
 * The shards a job may be in under `l`, the old one first: a job only ever
 * moves from its old shard to its new one, so a look in this order cannot
 * miss one that moves meanwhile. Both already in phase 'poll': a process that
 * read 'move' a little earlier may have written the job to its new shard.
 */
export function shardsOf(l: Layout, id: string): number[] {
  if (l.phase === 'steady') return [shardOf(id, l.from)];
  const o = shardOf(id, l.from);
  const n = shardOf(id, l.to);
  return o === n ? [n] : [o, n];
}

/** What a write fenced by a later layout answers: nothing was written (lua/queue/schedule.lua, cancel.lua). */
export const STALE = Symbol('stale layout');

// A fence is met only in the moment a change of the shard count enters
// 'move'; read again at once, the layout is the new one. Only a mover stopped
// between fencing the shards and recording 'move' makes this last (run it again).
const STALE_TRIES = 100;
const STALE_WAIT_MS = 20;

/**
 * Runs `op` on the layout, and again on one read afresh while it answers
 * STALE (it wrote nothing then). Throws after STALE_TRIES tries.
 */
export async function withLayout<T>(layout: ShardLayout, op: (l: Layout) => Promise<T | typeof STALE>): Promise<T> {
  for (let attempt = 0; attempt < STALE_TRIES; attempt++) {
    if (attempt > 1) await new Promise((r) => setTimeout(r, STALE_WAIT_MS));
    const r = await op(await layout.fresh(attempt > 0));
    if (r !== STALE) return r;
  }
  throw new Error('the shard layout keeps changing under this write: a change of the shard count stopped half way? run it again');
}
