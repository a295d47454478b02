// Rate limits shared by every instance through Redis: one generic cell rate
// algorithm (GCRA) bucket per key. A bucket admits `perSecond` on average and
// a burst of `burst` at once; a refusal says how long to wait. The decisions
// asked of one bucket in one event-loop turn share one script call, which
// judges them in the order they were asked, as that many calls one after the
// other would (a request's Redis round trip was a tenth of the service's CPU
// under POST /parcels at 50 connections). The script (lua/limits/gcra.lua)
// keeps a bucket in whole microseconds. When Redis is down or slow the limit
// is not enforced (the request goes on): a limit must never be what makes the
// API unavailable.
import { type RateDecision, runGcra } from '../queue/index.js';
import { createKeyedGatherer } from './gather.js';
import type { RedisClient } from './redis.js';
import { redisCall } from './redis-call.js';

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
 * A limit of `perSecond` per key with bursts of `burst`, its buckets named
 * by `prefix`, `name` and the key (queue/keys.ts). The caller validates `key`
 * (it becomes part of a Redis key): an id, an address, or a hash.
 */
export function rateLimit(redis: RedisClient, prefix: string, name: string, perSecond: number, burst: number): RateLimit {
  // Rounded up: never more than perSecond.
  const interval = Math.ceil(1_000_000 / perSecond);
  const tolerance = interval * burst;
  const admitted = (n: number) => Array.from({ length: n }, (): Verdict => ({ ok: true }));
  /** The decisions asked of one bucket in a turn, in order; every one admitted when Redis does not answer in time. */
  const judge = async (key: string, asked: readonly RateDecision[]): Promise<Verdict[]> => {
    if (redis.status !== 'ready') return admitted(asked.length);
    try {
      const waits = await redisCall(runGcra(redis, prefix, name, key, interval, tolerance, asked), 'rate limit', LIMIT_CALL_TIMEOUT_MS);
      if (!waits) return admitted(asked.length);
      return waits.map((w): Verdict => (w > 0 ? { ok: false, retryAfterMs: w } : { ok: true }));
    } catch {
      return admitted(asked.length);
    }
  };
  const decisions = createKeyedGatherer(judge, GATHER_MAX);
  return { take: (key) => decisions.submit(key, 't'), check: (key) => decisions.submit(key, 'c') };
}

/** Decisions of one bucket in one call at most (a turn's beyond it go in a second call, sent right after). */
const GATHER_MAX = 1_000;

/** Retry-After in whole seconds, at least 1. */
export const retryAfterSeconds = (ms: number) => String(Math.max(1, Math.ceil(ms / 1_000)));
