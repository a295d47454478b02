// Rate limits shared by every instance through Redis: one generic cell rate
// algorithm (GCRA) bucket per key, one script call per decision. A bucket
// admits `perSecond` on average and a burst of `burst` at once; a refusal says
// how long to wait. When Redis is down or slow the limit is not enforced (the
// request goes on): a limit must never be what makes the API unavailable.
import { createHash } from 'node:crypto';
import type { RedisClient } from './redis.js';
import { redisCall } from './redis-call.js';

// KEYS[1] the bucket (its value: the theoretical arrival time, ms on the Redis clock).
// ARGV[1] ms between admissions (1000 / rate), ARGV[2] burst tolerance ms,
// ARGV[3] 'take' (admit and record) or 'check' (would it admit?).
// Returns 0 when admitted, else the ms until one would be.
const GCRA = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local interval = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local nextTat = tat + interval
local wait = nextTat - tolerance - now
if wait > 0 then return math.ceil(wait) end
if ARGV[3] == 'take' then redis.call('SET', KEYS[1], tostring(nextTat), 'PX', math.ceil(nextTat - now) + 1) end
return 0
`;
const SHA = createHash('sha1').update(GCRA).digest('hex');

/** How long a request waits for the limiter before going on without it. */
export const LIMIT_CALL_TIMEOUT_MS = 100;

export type Verdict = { readonly ok: true } | { readonly ok: false; readonly retryAfterMs: number };

export type RateLimit = {
  /** Admits one more under `key` (recorded), or says how long to wait. */
  take(key: string): Promise<Verdict>;
  /** Whether one more would be admitted, without recording it. */
  check(key: string): Promise<Verdict>;
};

/**
 * A limit of `perSecond` per key with bursts of `burst`, its buckets at
 * `<prefix>:rl:<name>:<key>`. The caller validates `key` (it becomes part of a
 * Redis key): an id, an address, or a hash.
 */
export function rateLimit(redis: RedisClient, prefix: string, name: string, perSecond: number, burst: number): RateLimit {
  const interval = 1_000 / perSecond;
  const tolerance = interval * burst;
  const run = async (key: string, mode: 'take' | 'check'): Promise<Verdict> => {
    if (redis.status !== 'ready') return { ok: true };
    const keyName = `${prefix}:rl:${name}:${key}`;
    const args = [1, keyName, interval, tolerance, mode] as const;
    try {
      const wait = await redisCall(
        redis.evalsha(SHA, ...args).catch((err: unknown) => {
          if (err instanceof Error && err.message.startsWith('NOSCRIPT')) return redis.eval(GCRA, ...args);
          throw err;
        }),
        'rate limit',
        LIMIT_CALL_TIMEOUT_MS,
      );
      return Number(wait) > 0 ? { ok: false, retryAfterMs: Number(wait) } : { ok: true };
    } catch {
      return { ok: true };
    }
  };
  return { take: (key) => run(key, 'take'), check: (key) => run(key, 'check') };
}

/** Retry-After in whole seconds, at least 1. */
export const retryAfterSeconds = (ms: number) => String(Math.max(1, Math.ceil(ms / 1_000)));
