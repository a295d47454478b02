// The pause state through a change of the shard count (producer/reshard.ts):
// new shards start with shard 0's, and before producers switch shards and
// again before the change ends every shard is made to agree with shard 0, so
// a pause or resume that a process sent by the old layout alone (it had not
// read the change yet) still holds in the shards it did not know of.
import type { ShardKeys } from '../keys.js';
import type { RedisClient } from '../redis-client.js';
import { readPaused, runPause, runResume } from '../scripts/admin-scripts.js';

/** Parked jobs moved back per resume call (as controls.ts). */
const RESUME_CHUNK = 500;
/** Rounds of repair before giving up: only pauses and resumes sent all along keep the shards apart. */
const ROUNDS = 20;

/** New shards start with the pause state the queue has (shard 0's): a paused queue stays paused in them. */
export async function copyPauseState(redis: RedisClient, keys: readonly ShardKeys[], from: number, to: number): Promise<void> {
  const state = await redis.hgetall((keys[0] as ShardKeys).paused);
  for (let s = from; s < to; s++) {
    const k = (keys[s] as ShardKeys).paused;
    await redis.del(k);
    if (Object.keys(state).length > 0) await redis.hset(k, state);
  }
}

/**
 * Pauses in shards 1..n-1 what shard 0 pauses and resumes there (parked jobs
 * back to due) what it does not, read again until one read finds every shard
 * as shard 0: a pause or resume running meanwhile reaches shard 0 too, and the
 * next round follows it. Returns the differences repaired; false when the
 * shards still differed after ROUNDS rounds.
 */
export async function alignPauseState(redis: RedisClient, keys: readonly ShardKeys[], n: number): Promise<number | false> {
  let repairs = 0;
  for (let round = 0; round < ROUNDS; round++) {
    const per = await Promise.all(keys.slice(0, n).map((k) => readPaused(redis, k)));
    const want = per[0] ?? {};
    let differ = 0;
    for (let s = 1; s < n; s++) {
      const k = keys[s] as ShardKeys;
      const have = per[s] ?? {};
      for (const f of Object.keys(want)) if (!(f in have)) differ += (await runPause(redis, k, f), 1);
      for (const f of Object.keys(have)) if (!(f in want)) differ += (await drain(redis, k, f), 1);
    }
    if (differ === 0) return repairs;
    repairs += differ;
  }
  return false;
}

async function drain(redis: RedisClient, k: ShardKeys, target: string): Promise<void> {
  let r = await runResume(redis, k, target, true, RESUME_CHUNK);
  while (r.left > 0 && r.moved > 0) r = await runResume(redis, k, target, false, RESUME_CHUNK);
}
