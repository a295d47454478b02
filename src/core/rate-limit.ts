// Rate limits shared by every instance through Redis: one generic cell rate
// algorithm (GCRA) bucket per key. A bucket admits `perSecond` on average and
// a burst of `burst` at once; a refusal says how long to wait. The decisions
// asked of one bucket in one event-loop turn share one script call, which
// judges them in the order they were asked, as that many calls one after the
// other would (a request's Redis round trip was a tenth of the service's CPU
// under POST /parcels at 50 connections). Times are whole microseconds, exact
// in Lua's doubles: a bucket kept in ms was stored through Lua's tostring
// (14 significant digits, 0.1 ms here), which lost an interval under 0.05 ms
// (no limit above 20 000 a second) and skewed others. When Redis is down or
// slow the limit is not enforced (the request goes on): a limit must never be
// what makes the API unavailable.
import { createHash } from 'node:crypto';
import { createKeyedGatherer } from './gather.js';
import type { RedisClient } from './redis.js';
import { redisCall } from './redis-call.js';

// KEYS[1] the bucket (its value: the theoretical arrival time, µs on the Redis clock).
// ARGV[1] µs between admissions, ARGV[2] burst tolerance µs, ARGV[3] the
// decisions in the order asked, one letter each: 't' take (admit and record),
// 'c' check (would it admit?), judged one after the other at this call's moment.
// Returns, per decision, 0 when admitted, else the ms until one would be.
const GCRA = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local asked = ARGV[3]
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local waits = {}
local taken = false
for i = 1, #asked do
  local nextTat = tat + interval
  local wait = nextTat - tolerance - now
  if wait > 0 then
    waits[i] = math.ceil(wait / 1000)
  else
    waits[i] = 0
    if string.byte(asked, i) == 116 then
      tat = nextTat
      taken = true
    end
  end
end
if taken then redis.call('SET', KEYS[1], string.format('%.0f', tat), 'PX', math.ceil((tat - now) / 1000) + 1) end
return waits
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
 * `<prefix>:rl2:<name>:<key>`. The caller validates `key` (it becomes part of a
 * Redis key): an id, an address, or a hash.
 */
export function rateLimit(redis: RedisClient, prefix: string, name: string, perSecond: number, burst: number): RateLimit {
  // Rounded up: never more than perSecond.
  const interval = Math.ceil(1_000_000 / perSecond);
  const tolerance = interval * burst;
  const admitted = (n: number) => Array.from({ length: n }, (): Verdict => ({ ok: true }));
  /** The decisions asked of one bucket in a turn, in order; every one admitted when Redis does not answer in time. */
  const judge = async (key: string, asked: readonly Mode[]): Promise<Verdict[]> => {
    if (redis.status !== 'ready') return admitted(asked.length);
    // rl2: µs; a bucket in ms (rl) read as µs would refuse everything while instances of both run.
    const args = [1, `${prefix}:rl2:${name}:${key}`, interval, tolerance, asked.join('')] as const;
    try {
      const waits = await redisCall(
        redis.evalsha(SHA, ...args).catch((err: unknown) => {
          if (err instanceof Error && err.message.startsWith('NOSCRIPT')) return redis.eval(GCRA, ...args);
          throw err;
        }),
        'rate limit',
        LIMIT_CALL_TIMEOUT_MS,
      );
      if (!Array.isArray(waits) || waits.length !== asked.length) return admitted(asked.length);
      return waits.map((w): Verdict => (Number(w) > 0 ? { ok: false, retryAfterMs: Number(w) } : { ok: true }));
    } catch {
      return admitted(asked.length);
    }
  };
  const decisions = createKeyedGatherer(judge, GATHER_MAX);
  return { take: (key) => decisions.submit(key, 't'), check: (key) => decisions.submit(key, 'c') };
}

/** A decision: 't' take, 'c' check. */
type Mode = 't' | 'c';
/** Decisions of one bucket in one call at most (a turn's beyond it go in a second call, sent right after). */
const GATHER_MAX = 1_000;

/** Retry-After in whole seconds, at least 1. */
export const retryAfterSeconds = (ms: number) => String(Math.max(1, Math.ceil(ms / 1_000)));
