// Refuses to run over queue data written before the due buckets (2026-11-23):
// one due ZSET per shard (`dq:{q:s}:due`) and records without a due time. This
// build would never see those pending jobs and would misread those records,
// so the service stops at start with what to do instead.
import { parseRecord } from './record.js';
import type { Queue } from './queue.js';
import type { RedisClient } from './redis-client.js';

export class QueueLayoutError extends Error {}

/** Throws QueueLayoutError naming the shards that hold data of the old layout. */
export async function checkQueueLayout(redis: RedisClient, queues: readonly Queue[]): Promise<void> {
  const shards = queues.flatMap((q) => q.keys);
  const old = await Promise.all(
    shards.map(async (k) => {
      // The old due ZSET's name: the bucket prefix without its last ':'.
      if ((await redis.exists(k.dueBuckets.slice(0, -1))) === 1) return true;
      // A shard with no pending job left still has its in-flight and dead records.
      const sample = (await redis.hrandfield(k.jobs, 1, 'WITHVALUES')) as string[];
      if (sample[1] === undefined) return false;
      try {
        parseRecord(sample[1]);
        return false;
      } catch {
        return true;
      }
    }),
  );
  const found = shards.filter((_, i) => old[i]).map((k) => k.jobs.slice(0, k.jobs.lastIndexOf(':')));
  if (found.length === 0) return;
  throw new QueueLayoutError(
    `Redis holds queue data of the layout before the due buckets (2026-11-23) under ${found.join(', ')}; this build cannot read it. ` +
      'Let the previous build run these queues empty, or delete those keys (<prefix>:{<queue>:<shard>}:*) and start again: ' +
      'the reconciliation passes schedule every order expiry, reminder and notification again from PostgreSQL ' +
      '(attempt counts and dead letters kept only in Redis are lost).',
  );
}
