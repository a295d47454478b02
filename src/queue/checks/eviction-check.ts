// Warns when Redis may evict keys: an evicted job record or due entry is a job
// silently lost, so the queue needs maxmemory-policy noeviction.
import { type RedisClient, isCluster, masters } from '../redis-client.js';
import type { QueueLogger } from '../types.js';
import { withTimeout } from '../timeout.js';

const CHECK_TIMEOUT_MS = 5_000;

/** Returns the policy, or null when the server does not allow CONFIG GET. */
export async function checkEvictionPolicy(redis: RedisClient, log: QueueLogger): Promise<string | null> {
  let policy: string | null = null;
  try {
    // On a cluster every master must keep its keys; the first lax one is
    // reported. Its node list is only known once it has answered.
    // Bounded: a master that does not answer must not hold up the start (its
    // commands would wait for a reconnect forever).
    const read = async () => {
      if (isCluster(redis)) await redis.ping();
      return (await Promise.all(masters(redis).map((m) => m.config('GET', 'maxmemory-policy')))) as string[][];
    };
    const replies = await withTimeout(read(), CHECK_TIMEOUT_MS, 'maxmemory-policy check');
    policy = replies.map((r) => r[1] ?? null).find((p) => p !== 'noeviction') ?? 'noeviction';
  } catch (err) {
    log.warn({ err }, 'cannot read Redis maxmemory-policy (CONFIG GET refused or no answer); make sure it is noeviction');
    return null;
  }
  if (policy !== 'noeviction') {
    log.warn(
      { maxmemoryPolicy: policy },
      'Redis maxmemory-policy is not noeviction: under memory pressure Redis may evict queue keys and lose jobs; set maxmemory-policy noeviction',
    );
  }
  return policy;
}
