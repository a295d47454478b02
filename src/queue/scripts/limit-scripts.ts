// Typed wrapper of the rate limiter's Lua script (lua/limits/gcra.lua); the
// limiter itself (fail-open, gathering a turn's decisions) is core/rate-limit.ts.
import { distinctWindowKey, rateBucketKey } from '../keys.js';
import type { RedisClient } from '../redis-client.js';
import { call } from './registry.js';

/** A rate-limit decision: 't' take (admit and record), 'c' check (would it admit?, records nothing). */
export type RateDecision = 't' | 'c';

/**
 * Judges `asked`, in order, against the bucket of `key` under the limit
 * `limit`, with `intervalUs` µs between admissions and a burst tolerance of
 * `toleranceUs` µs. Per decision: 0 when admitted, else the ms until one would
 * be; null when the reply is not one wait per decision.
 */
export async function runGcra(
  redis: RedisClient,
  prefix: string,
  limit: string,
  key: string,
  intervalUs: number,
  toleranceUs: number,
  asked: readonly RateDecision[],
): Promise<number[] | null> {
  const r = await call(redis, 'rlGcra', { bucket: rateBucketKey(prefix, limit, key) }, [intervalUs, toleranceUs, asked.join('')]);
  if (!Array.isArray(r) || r.length !== asked.length) return null;
  return r.map(Number);
}

/**
 * Admits `member` into the sliding window of distinct members of `key` under
 * the limit `limit` (lua/limits/distinct.lua): 0 when admitted, else the ms
 * until a place frees; null when the reply is not a number.
 */
export async function runDistinct(
  redis: RedisClient,
  prefix: string,
  limit: string,
  key: string,
  windowMs: number,
  max: number,
  member: string,
): Promise<number | null> {
  const r = await call(redis, 'rlDistinct', { window: distinctWindowKey(prefix, limit, key) }, [windowMs, max, member]);
  const n = Number(r);
  return Number.isFinite(n) ? n : null;
}
