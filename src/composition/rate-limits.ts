// The queue limiter of this process (outbound rate limits shared through
// Redis) and the keeper of the run-time rules (PostgreSQL's copy put back
// into Redis when Redis lost it); both stop with the stack.
import type { Config } from '../config.js';
import type { Db } from '../core/db.js';
import type { Logger } from '../core/logger.js';
import type { Metrics } from '../core/metrics.js';
import type { RedisClient } from '../core/redis.js';
import { type RateLimitStore, createRateLimitStore } from '../modules/admin/rate-limits.store.js';
import { type QueueLimiter, createQueueLimiter } from '../queue/index.js';
import type { Stack } from './stack.js';

export async function startRateLimits(o: {
  config: Config;
  log: Logger;
  redis: RedisClient;
  db: Db;
  metrics: Metrics;
  stack: Stack;
}): Promise<{ limiter: QueueLimiter; store: RateLimitStore }> {
  const log = o.log.child({ component: 'rate-limits' });
  const limiter = createQueueLimiter({ redis: o.redis, prefix: o.config.QUEUE_PREFIX, rules: o.config.QUEUE_RATE_LIMITS, log });
  const store = createRateLimitStore({ db: o.db, redis: o.redis, limiter, log });
  // PostgreSQL's rules into Redis before the first claim; a database away at
  // start leaves it to the keeper (the configured rules apply meanwhile).
  await store.sync().catch((err: unknown) => log.warn({ err }, 'run-time rate limits not read at start; the keeper tries again'));
  await limiter.start();
  store.start();
  o.stack.push({ name: 'rate-limits', stop: () => (store.stop(), limiter.stop()) });
  o.metrics.watchLimiter(limiter);
  return { limiter, store };
}
