// Rate limits shared by every instance through Redis: one generic cell rate
// algorithm (GCRA) bucket per key. A bucket admits `perSecond` on average and
// a burst of `burst` at once; a refusal says how long to wait. The decisions
// asked of one bucket in one event-loop turn share one script call, which
// judges them in the order they were asked, as that many calls one after the
// other would (a request's Redis round trip was a tenth of the service's CPU
// under POST /parcels at 50 connections). The script (lua/limits/gcra.lua)
// keeps a bucket in whole microseconds.
// A reply late because this process is busy is waited for: a limit that gave
// up then would admit everything under exactly the overload it is there to
// shed. Only Redis away (the connection not ready, a connection error, or no
// answer within REDIS_CALL_TIMEOUT_MS of the call, counted by redisCall from
// the write and never tripped by a busy event loop) ends the wait: then the
// limit admits, or, for a limit guarding something paid, refuses with
// RedisUnavailableError (503 with Retry-After).
import { type RateDecision, runDistinct, runGcra } from '../queue/index.js';
import { createKeyedGatherer } from './gather.js';
import type { RedisClient } from './redis.js';
import { RedisUnavailableError, redisCall } from './redis-call.js';

export type Verdict = { readonly ok: true } | { readonly ok: false; readonly retryAfterMs: number };

export type RateLimit = {
  /** Admits one more under `key` (recorded), or says how long to wait. */
  take(key: string): Promise<Verdict>;
  /** Whether one more would be admitted, without recording it. */
  check(key: string): Promise<Verdict>;
};

/**
 * What a limit does while Redis is away: `admit` (the request goes on: a
 * limit must not be what makes the API unavailable), or `refuse` (the
 * decision throws RedisUnavailableError: for a limit in front of a paid
 * channel, where an unlimited burst costs more than a retry).
 */
export type WhenRedisAway = 'admit' | 'refuse';

/**
 * A limit of `perSecond` per key with bursts of `burst`, its buckets named
 * by `prefix`, `name` and the key (queue/keys.ts). The caller validates `key`
 * (it becomes part of a Redis key): an id, an address, or a hash.
 */
export function rateLimit(redis: RedisClient, prefix: string, name: string, perSecond: number, burst: number, whenAway: WhenRedisAway = 'admit'): RateLimit {
  // Rounded up: never more than perSecond.
  const interval = Math.ceil(1_000_000 / perSecond);
  const tolerance = interval * burst;
  const admitted = (n: number) => Array.from({ length: n }, (): Verdict => ({ ok: true }));
  /** The decisions asked of one bucket in a turn, in order. */
  const judge = async (key: string, asked: readonly RateDecision[]): Promise<Verdict[]> => {
    if (redis.status !== 'ready') {
      if (whenAway === 'admit') return admitted(asked.length);
      throw new RedisUnavailableError(`rate limit ${name}: redis is not connected (${redis.status})`);
    }
    let waits: number[] | null;
    try {
      waits = await redisCall(runGcra(redis, prefix, name, key, interval, tolerance, asked), `rate limit ${name}`);
    } catch (err) {
      // No verdict (Redis away, or a script error or full Redis): the
      // admitting kind admits, the refusing kind fails with the error (503
      // for Redis away, through the error funnel).
      if (whenAway === 'admit') return admitted(asked.length);
      throw err;
    }
    if (waits) return waits.map((w): Verdict => (w > 0 ? { ok: false, retryAfterMs: w } : { ok: true }));
    if (whenAway === 'admit') return admitted(asked.length);
    throw new Error(`rate limit ${name}: the script answered no verdict per decision`);
  };
  const decisions = createKeyedGatherer(judge, GATHER_MAX);
  return { take: (key) => decisions.submit(key, 't'), check: (key) => decisions.submit(key, 'c') };
}

/**
 * A limit of `max` distinct members per key within a sliding `windowMs` (a
 * client's distinct reminder contacts an hour): a member seen in the window
 * is admitted again, a new one only below the limit. It guards a paid channel,
 * so it refuses while Redis is away (RedisUnavailableError, a 503), as the
 * refusing rate limit does. `key` is validated by the caller (a client id);
 * `member` is a hash, never what it stands for.
 */
export function distinctLimit(redis: RedisClient, prefix: string, name: string, max: number, windowMs: number) {
  return {
    async admit(key: string, member: string): Promise<Verdict> {
      if (redis.status !== 'ready') throw new RedisUnavailableError(`limit ${name}: redis is not connected (${redis.status})`);
      const wait = await redisCall(runDistinct(redis, prefix, name, key, windowMs, max, member), `limit ${name}`);
      if (wait === null) throw new Error(`limit ${name}: the script answered no verdict`);
      return wait > 0 ? { ok: false, retryAfterMs: wait } : { ok: true };
    },
  };
}
export type DistinctLimit = ReturnType<typeof distinctLimit>;

/** Decisions of one bucket in one call at most (a turn's beyond it go in a second call, sent right after). */
const GATHER_MAX = 1_000;

/** Retry-After in whole seconds, at least 1. */
export const retryAfterSeconds = (ms: number) => String(Math.max(1, Math.ceil(ms / 1_000)));
