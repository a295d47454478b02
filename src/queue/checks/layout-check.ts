// Refuses to run over queue data it would misread, naming what to do instead:
// data written before the due buckets (one due ZSET per shard, `dq:{q:s}:due`,
// and records without a due time), and data written with
// another shard count (QUEUE_SHARDS), which this build would look for in the
// wrong shards.
import { shardCountKey } from '../keys.js';
import { CORRUPT_RECORD_ERROR, parseRecord } from '../record.js';
import type { Queue } from '../producer/queue.js';
import type { RedisClient } from '../redis-client.js';

export class QueueLayoutError extends Error {}

/** Throws QueueLayoutError naming the shards that hold data of the old layout, or the queues written with another shard count. */
export async function checkQueueLayout(redis: RedisClient, queues: readonly Queue[]): Promise<void> {
  await checkShardCounts(redis, queues);
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
        // A record a claim parked as corrupt is unreadable in any layout: not
        // a sign of the old one (it would keep the service from starting).
        return (await redis.hget(k.errors, sample[0] as string)) !== CORRUPT_RECORD_ERROR;
      }
    }),
  );
  const found = shards.filter((_, i) => old[i]).map((k) => k.jobs.slice(0, k.jobs.lastIndexOf(':')));
  if (found.length === 0) return;
  throw new QueueLayoutError(
    `Redis holds queue data of the layout before the due buckets under ${found.join(', ')}; this build cannot read it. ` +
      'Let the previous build run these queues empty, or delete those keys (<prefix>:{<queue>:<shard>}:*) and start again: ' +
      'the reconciliation passes schedule every order expiry, reminder and notification again from PostgreSQL ' +
      '(attempt counts and dead letters kept only in Redis are lost).',
  );
}

/**
 * Records each queue's shard count on first start and refuses a different one
 * later. Changing QUEUE_SHARDS over live data needs a drain: stop the API,
 * let the workers run every queue empty (stats: nothing pending, in flight
 * or dead), delete the `<prefix>:{<queue>:0}:shards` keys, then start with
 * the new count (the reconciliation passes re-create anything missed).
 */
async function checkShardCounts(redis: RedisClient, queues: readonly Queue[]): Promise<void> {
  const wrong: string[] = [];
  for (const q of queues) {
    const key = shardCountKey(q.prefix, q.name);
    await redis.set(key, String(q.shards), 'NX');
    const stored = await redis.get(key);
    if (stored !== null && Number(stored) !== q.shards) wrong.push(`${q.name} (written with ${stored}, configured ${q.shards})`);
  }
  if (wrong.length === 0) return;
  throw new QueueLayoutError(
    `Redis holds queue data written with another QUEUE_SHARDS: ${wrong.join(', ')}. Jobs are spread by hash mod the shard count, ` +
      'so this build would strand jobs or run a second copy of them. To change it: stop the API, let the workers run the queues ' +
      'empty, delete the keys <prefix>:{<queue>:0}:shards, then start with the new count; or start with the old count.',
  );
}
