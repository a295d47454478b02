// Typed wrappers of the rate limiters' Lua scripts: the API's (lua/limits/gcra.lua,
// distinct.lua; the limiter itself, fail-open, gathering a turn's decisions, is
// core/rate-limit.ts) and the queue limiter's (admit.lua, slow-down.lua; queue/limits/).
import { type QueueLimitKeys, distinctWindowKey, rateBucketKey } from '../keys.js';
import type { RedisClient } from '../redis-client.js';
import { endpointScope } from '../limits/limit-rules.js';
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

/** A bucket's limit in the admit script's units: µs between admissions and the burst tolerance (0, 0: no limit). */
export type BucketLimit = { readonly scope: string; readonly intervalUs: number; readonly toleranceUs: number };
const NONE: BucketLimit = { scope: '', intervalUs: 0, toleranceUs: 0 };

/** What the admit script tells a queue limiter about its scope. */
export type AdmitOptions = {
  /** Each step past a hold undoes one halving (ms). */
  readonly recoveryMs: number;
  /** The furthest turn booked (ms): a job's turn further away is judged again then. */
  readonly horizonMs: number;
  /** A slowed endpoint's interval when no rule limits it (µs). */
  readonly slowedIntervalUs: number;
};

/**
 * Judges `members` (one a job, in order) against the queue's, the type's and
 * the endpoint's buckets and the endpoint's slow-down (lua/limits/admit.lua):
 * a job refused is booked at its turn and admitted on that booking when it
 * comes back. Per job: 0 admitted, else the ms until it comes back. A bucket
 * left out has no limit; with no endpoint, its slow-down is not read.
 */
export async function runAdmit(
  redis: RedisClient,
  keys: QueueLimitKeys,
  members: readonly string[],
  b: { queue?: BucketLimit; type?: BucketLimit; endpoint?: BucketLimit; endpointName: string | null },
  o: AdmitOptions,
): Promise<number[]> {
  const q = b.queue ?? NONE;
  const t = b.type ?? NONE;
  const e = b.endpoint ?? NONE;
  // Unlimited buckets still need a key of the tag; the script reads none of them.
  const spare = keys.rules;
  const r = (await call(
    redis,
    'qlAdmit',
    {
      queueBucket: q.intervalUs > 0 ? keys.bucket(q.scope) : spare,
      typeBucket: t.intervalUs > 0 ? keys.bucket(t.scope) : spare,
      // A slowed endpoint without a rule is spaced in its own bucket too.
      endpointBucket: b.endpointName === null ? spare : keys.bucket(endpointScope(b.endpointName)),
      endpointSlow: b.endpointName === null ? keys.slow('') : keys.slow(b.endpointName),
      bookings: keys.bookings,
    },
    [
      members.length,
      q.intervalUs,
      q.toleranceUs,
      t.intervalUs,
      t.toleranceUs,
      e.intervalUs,
      e.toleranceUs,
      o.recoveryMs,
      o.horizonMs,
      o.slowedIntervalUs,
      ...members,
    ],
  )) as (string | number)[];
  return r.map(Number);
}

/** Holds `endpoint` for `holdMs` and halves its rate once more (lua/limits/slow-down.lua): the hold's end (ms) and the halvings in force. */
export async function runSlowDown(
  redis: RedisClient,
  keys: QueueLimitKeys,
  endpoint: string,
  holdMs: number,
  maxLevel: number,
  recoveryMs: number,
): Promise<{ until: number; level: number }> {
  const r = (await call(redis, 'qlSlowDown', { endpointSlow: keys.slow(endpoint), slowed: keys.slowed }, [holdMs, maxLevel, recoveryMs, endpoint])) as number[];
  return { until: Number(r[0]), level: Number(r[1]) };
}
