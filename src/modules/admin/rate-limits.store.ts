// The run-time rate limits: PostgreSQL holds them (a restart keeps them),
// Redis the live copy every worker re-reads about once a second (the queue
// limiter). A change commits first, then goes to Redis; the keeper compares
// the two every few seconds and puts PostgreSQL's back into Redis when they
// differ (Redis lost them, a write to it failed after the commit, or two
// operators' changes of one scope reached the two in different orders).
import type { Db } from '../../core/db.js';
import type { Logger } from '../../core/logger.js';
import type { RedisClient } from '../../core/redis.js';
import { type LimitRule, type QueueLimiter, RULES_LOADED_FIELD, ruleField } from '../../queue/index.js';
import { deleteRateLimit, listRateLimits, upsertRateLimit } from './sql/rate-limits.js';

/** How often the keeper compares Redis's copy with PostgreSQL's rows. */
const KEEP_EVERY_MS = 5_000;

export type RateLimitStore = {
  put(rule: LimitRule): Promise<void>;
  /** False when the scope had no run-time limit. */
  remove(scope: string): Promise<boolean>;
  /** Redis's copy made equal to PostgreSQL's rows; true when it had to change. */
  sync(): Promise<boolean>;
  start(): void;
  stop(): void;
};

export function createRateLimitStore(o: { db: Db; redis: RedisClient; limiter: QueueLimiter; log: Logger }): RateLimitStore {
  const { db, redis, limiter, log } = o;
  const key = limiter.keys.rules;
  let timer: NodeJS.Timeout | undefined;

  async function sync(): Promise<boolean> {
    const [rows, held] = await Promise.all([listRateLimits(db), redis.hgetall(key)]);
    const want: Record<string, string> = { [RULES_LOADED_FIELD]: '1', ...Object.fromEntries(rows.map(ruleField)) };
    const same = Object.keys(want).length === Object.keys(held).length && Object.entries(want).every(([k, v]) => held[k] === v);
    if (same) return false;
    // Replaced whole in one transaction: a worker never reads half of it.
    await redis.multi().del(key).hset(key, want).exec();
    // Lost rules are worth a warning; none to put back (a first start) are not.
    if (held[RULES_LOADED_FIELD] === undefined && rows.length > 0)
      log.warn({ rules: rows.length }, 'run-time rate limits were missing in Redis; put back from PostgreSQL');
    await limiter.refresh();
    return true;
  }

  /**
   * The committed change into Redis's copy (the whole copy when it was lost).
   * A Redis that fails here leaves the change to the keeper (within
   * KEEP_EVERY_MS): it is committed, so the answer is still a success.
   */
  async function toRedis(change: () => Promise<unknown>): Promise<void> {
    try {
      if (await redis.hexists(key, RULES_LOADED_FIELD)) await change();
      else await sync();
      await limiter.refresh();
    } catch (err) {
      log.warn({ err }, 'run-time rate limit committed but not in Redis yet; the keeper puts it there');
    }
  }

  return {
    async put(rule) {
      await upsertRateLimit(db, rule);
      // The scope's bucket goes with the old rule: its far turns do not outlive it.
      await toRedis(() =>
        redis
          .multi()
          .hset(key, ...ruleField(rule))
          .del(limiter.keys.bucket(rule.scope))
          .exec(),
      );
    },
    async remove(scope) {
      const had = await deleteRateLimit(db, scope);
      await toRedis(() => redis.multi().hdel(key, scope).del(limiter.keys.bucket(scope)).exec());
      return had;
    },
    sync,
    start() {
      const loop = () => {
        timer = setTimeout(() => {
          sync()
            .catch((err: unknown) => log.warn({ err }, 'run-time rate limits not compared; trying again'))
            .finally(() => timer !== undefined && loop());
        }, KEEP_EVERY_MS);
        timer.unref();
      };
      loop();
    },
    stop() {
      clearTimeout(timer);
      timer = undefined;
    },
  };
}
