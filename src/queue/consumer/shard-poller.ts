// The claim step of one queue shard, run by a wake loop. It never polls on a
// tick: after each claim it sleeps until the earliest of the next due time, the
// next lease expiry and the idle re-check, and it is woken earlier by a Pub/Sub
// announcement of a new head or by free room in the worker's pool.
import { TimeoutError, withTimeout } from '../timeout.js';
import type { ShardKeys } from '../keys.js';
import { type ClaimedRaw, type RedisClient, runClaim } from '../scripts/scripts.js';
import { type ServerClock, localNow } from '../wake/server-clock.js';
import { createWakeLoop } from '../wake/wake-loop.js';
import type { QueueLogger } from '../types.js';

export type ShardPollerOptions = {
  readonly redis: RedisClient;
  readonly keys: ShardKeys;
  readonly shard: number;
  readonly clock: ServerClock;
  readonly log: QueueLogger;
  readonly batchSize: number;
  readonly leaseMs: number;
  readonly idleRecheckMs: number;
  /**
   * A claim unanswered this long is given up on (and its connection treated
   * as dead); one that reaches Redis later than this changes nothing there.
   */
  readonly claimTimeoutMs: number;
  /** Jobs due longer ago than this (ms) are claimed ahead of priority, oldest first. */
  readonly priorityAgingMs: number;
  /** How many more jobs the pool can take now. */
  room(): number;
  /** Hands claimed jobs to the pool (claimedAt: the local ms the claim was asked, before its leases began); `late`: the claim answered after its timeout (it may bring more than room()). */
  accept(jobs: ClaimedRaw[], shard: number, claimedAt: number, late: boolean): void;
  onClaim(count: number, reclaimed: number): void;
  onConnectionSuspect(): void;
};

export type ShardPoller = {
  /** Run a claim at local monotonic time `at` (or sooner if already planned). */
  wakeAt(at: number): void;
  wakeNow(): void;
  /** True when the last loop stopped because the pool was full: it waits for room. */
  readonly starved: boolean;
  /** Stop claiming; resolves when no claim is in flight. */
  stop(): Promise<void>;
};

const ERROR_BACKOFF_MS = 250;
const MAX_RECLAIM_PER_CLAIM = 100;
/** Beyond the claim's deadline in Redis, the wait for its answer allows this much for the round trip. */
const ANSWER_SLACK_MS = 1_000;

export function createShardPoller(o: ShardPollerOptions): ShardPoller {
  let starved = false;

  async function step(): Promise<number | 'again' | 'wait'> {
    const room = o.room();
    if (room <= 0) {
      starved = true; // the pool wakes us when a slot frees
      return 'wait';
    }
    starved = false;
    const want = Math.min(room, o.batchSize);
    const t0 = localNow();
    // The deadline, on the Redis clock, past which the claim must not run: a
    // claim left on the connection of a server that hung runs when it wakes,
    // long after we stopped waiting, and would lease jobs to nobody.
    const claim = runClaim(o.redis, o.keys, want, o.leaseMs, MAX_RECLAIM_PER_CLAIM, o.clock.now() + o.claimTimeoutMs, o.priorityAgingMs);
    let r;
    try {
      r = await withTimeout(claim, o.claimTimeoutMs + ANSWER_SLACK_MS, 'claim');
    } catch (err) {
      o.log.error({ err, shard: o.shard, keys: o.keys.due }, 'claim failed; retrying');
      if (err instanceof TimeoutError) {
        // The answer may still come (a slow server, not a dead one): its jobs
        // must reach the pool, or go back, not sit leased to nobody.
        claim.then((late) => late.jobs.length > 0 && o.accept(late.jobs, o.shard, t0, true)).catch(() => {});
        o.onConnectionSuspect();
      }
      return localNow() + ERROR_BACKOFF_MS;
    }
    const t1 = localNow();
    // Ran past its deadline: it changed nothing. Either the server held it
    // (a hang) or our estimate of its clock is off; its clock is taken as it
    // is now, so the next claim's deadline is right.
    o.clock.sample(r.now, t0, t1, r.late);
    if (r.late) return 'again';
    if (r.jobs.length > 0 || r.reclaimed > 0) o.onClaim(r.jobs.length, r.reclaimed);
    if (r.jobs.length > 0) o.accept(r.jobs, o.shard, t0, false);
    // More may be due; parked jobs (a paused type) made room for the ones behind them.
    if (r.jobs.length === want || r.reclaimed === MAX_RECLAIM_PER_CLAIM || r.parked > 0) return 'again';
    const next = Math.min(r.nextDue ?? Number.POSITIVE_INFINITY, r.nextLease ?? Number.POSITIVE_INFINITY);
    const sleep = Math.min(Math.max(0, next - r.now), o.idleRecheckMs);
    return o.clock.localAt(r.now + sleep);
  }

  const loop = createWakeLoop(step, (err) => o.log.error({ err, shard: o.shard, keys: o.keys.due }, 'claim step failed; retrying'));
  return {
    wakeAt: loop.wakeAt,
    wakeNow: loop.wakeNow,
    stop: loop.stop,
    get starved() {
      return starved;
    },
  };
}
