// Rate limits shared by every instance through Redis: one generic cell rate
// algorithm (GCRA) bucket per key. A bucket admits `perSecond` on average and
// a burst of `burst` at once; a refusal says how long to wait. The decisions
// asked of one bucket in one event-loop turn share one script call, which
// judges them in the order they were asked, as that many calls one after the
// other would (a request's Redis round trip was a tenth of the service's CPU
// under POST /parcels at 50 connections). When Redis is down or slow the
// limit is not enforced (the request goes on): a limit must never be what
// makes the API unavailable.
import { createHash } from 'node:crypto';
import { createGatherer, type Settled } from './gather.js';
import type { RedisClient } from './redis.js';
import { redisCall } from './redis-call.js';

// KEYS[1] the bucket (its value: the theoretical arrival time, ms on the Redis clock).
// ARGV[1] ms between admissions (1000 / rate), ARGV[2] burst tolerance ms,
// ARGV[3] 'take' (admit and record) or 'check' (would it admit?), ARGV[4] how
// many decisions, judged one after the other at this call's moment.
// Returns, per decision, 0 when admitted, else the ms until one would be.
const GCRA = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local interval = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local take = ARGV[3] == 'take'
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local waits = {}
local taken = false
for i = 1, tonumber(ARGV[4]) do
  local nextTat = tat + interval
  local wait = nextTat - tolerance - now
  if wait > 0 then
    waits[i] = math.ceil(wait)
  else
    waits[i] = 0
    if take then
      tat = nextTat
      taken = true
    end
  end
end
if taken then redis.call('SET', KEYS[1], tostring(tat), 'PX', math.ceil(tat - now) + 1) end
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
 * `<prefix>:rl:<name>:<key>`. The caller validates `key` (it becomes part of a
 * Redis key): an id, an address, or a hash.
 */
export function rateLimit(redis: RedisClient, prefix: string, name: string, perSecond: number, burst: number): RateLimit {
  const interval = 1_000 / perSecond;
  const tolerance = interval * burst;
  /** `n` decisions of one bucket in one call; every one admitted when Redis does not answer in time. */
  const judge = async (key: string, mode: Mode, n: number): Promise<Verdict[]> => {
    const admitted = () => Array.from({ length: n }, (): Verdict => ({ ok: true }));
    if (redis.status !== 'ready') return admitted();
    const args = [1, `${prefix}:rl:${name}:${key}`, interval, tolerance, mode, n] as const;
    try {
      const waits = await redisCall(
        redis.evalsha(SHA, ...args).catch((err: unknown) => {
          if (err instanceof Error && err.message.startsWith('NOSCRIPT')) return redis.eval(GCRA, ...args);
          throw err;
        }),
        'rate limit',
        LIMIT_CALL_TIMEOUT_MS,
      );
      if (!Array.isArray(waits) || waits.length !== n) return admitted();
      return waits.map((w): Verdict => (Number(w) > 0 ? { ok: false, retryAfterMs: Number(w) } : { ok: true }));
    } catch {
      return admitted();
    }
  };
  // The decisions of a turn, one call per bucket and mode, each answered in the order asked.
  const decisions = createGatherer<Decision, Verdict>(async (asked) => {
    const groups = new Map<string, number[]>();
    asked.forEach((d, i) => {
      const g = `${d.mode}:${d.key}`;
      const at = groups.get(g);
      if (at) at.push(i);
      else groups.set(g, [i]);
    });
    const answers: Settled<Verdict>[] = new Array(asked.length);
    await Promise.all(
      [...groups.values()].map(async (at) => {
        const first = asked[at[0] as number] as Decision;
        const verdicts = await judge(first.key, first.mode, at.length);
        at.forEach((i, k) => (answers[i] = { ok: true, value: verdicts[k] as Verdict }));
      }),
    );
    return answers;
  }, GATHER_MAX);
  return { take: (key) => decisions.submit({ key, mode: 'take' }), check: (key) => decisions.submit({ key, mode: 'check' }) };
}

type Mode = 'take' | 'check';
type Decision = { key: string; mode: Mode };
/** Decisions sharing one gathering at most (a turn's beyond it go in the next call). */
const GATHER_MAX = 1_000;

/** Retry-After in whole seconds, at least 1. */
export const retryAfterSeconds = (ms: number) => String(Math.max(1, Math.ceil(ms / 1_000)));
