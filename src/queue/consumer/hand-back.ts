// Claimed jobs handed back without using an attempt, each at its own due time
// (lua/queue/release.lua): they come back in the order they were due, ahead
// of jobs that fell due meanwhile. The pool's stalled and paused hand-backs
// and the intake's hand-back of a claim answered after a pause use it.
import type { ShardKeys } from '../keys.js';
import type { Queue } from '../producer/queue.js';
import { type RedisClient, runRelease } from '../scripts/scripts.js';
import type { Job, QueueLogger } from '../types.js';

/** How many went back; a release that fails is logged (its jobs return after their lease). */
export async function handBackAtDue(
  d: { readonly queue: Queue; readonly redis: RedisClient; readonly log: QueueLogger },
  jobs: readonly Pick<Job, 'shard' | 'id' | 'token' | 'dueAt'>[],
): Promise<number> {
  const groups = new Map<string, { shard: number; at: number; items: { id: string; token: number }[] }>();
  for (const j of jobs) {
    const key = `${j.shard}:${j.dueAt}`;
    const g = groups.get(key) ?? { shard: j.shard, at: j.dueAt, items: [] };
    g.items.push({ id: j.id, token: j.token });
    groups.set(key, g);
  }
  const counts = await Promise.all(
    [...groups.values()].map(async (g) => {
      try {
        return await runRelease(d.redis, d.queue.keys[g.shard] as ShardKeys, g.items, { at: g.at });
      } catch (err) {
        d.log.error({ err, queue: d.queue.name, count: g.items.length }, 'release failed; jobs return after their lease');
        return 0;
      }
    }),
  );
  return counts.reduce((a, b) => a + b, 0);
}
