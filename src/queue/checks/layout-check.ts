// Refuses to run over queue data it would misread, naming what to do instead:
// data written before the due buckets (one due ZSET per shard, `dq:{q:s}:due`,
// and records without a due time), and data written with
// another shard count (QUEUE_SHARDS), which this build would look for in the
// wrong shards.
import { reshardKey, shardCountKey } from '../keys.js';
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
 * later, unless the reshard command is changing it between the stored count
 * and the configured one, or changed it from the configured one: processes
 * spread jobs by the stored count (shard-layout.ts), so a configuration older
 * than the reshard is safe. Any other count, changed in the configuration
 * alone, is refused.
 */
async function checkShardCounts(redis: RedisClient, queues: readonly Queue[]): Promise<void> {
  const wrong: string[] = [];
  for (const q of queues) {
    const key = shardCountKey(q.prefix, q.name);
    await redis.set(key, String(q.shards), 'NX');
    const stored = await redis.get(key);
    if (stored === null || Number(stored) === q.shards) continue;
    const move = await redis.hgetall(reshardKey(q.prefix, q.name));
    const running = move.phase === 'poll' || move.phase === 'move';
    if (running && (Number(move.from) === q.shards || Number(move.to) === q.shards)) continue;
    // Set by a reshard from the configured count: this process's configuration
    // is merely older than the change (any other count is still refused).
    if (move.phase === 'done' && move.to === stored && Number(move.from) === q.shards) continue;
    wrong.push(`${q.name} (written with ${stored}, configured ${q.shards})`);
  }
  if (wrong.length === 0) return;
  throw new QueueLayoutError(
    `Redis holds queue data written with another QUEUE_SHARDS: ${wrong.join(', ')}. Jobs are spread by hash mod the shard count, ` +
      'so this build would strand jobs or run a second copy of them. To change it while the service runs: npm run reshard -- ' +
      '--queue <name> --to <count> (docs/operations.md), then set QUEUE_SHARDS to the new count; or start with the stored count.',
  );
}
