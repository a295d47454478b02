// A claimed job's lease as the worker reckons it: how long it is surely held,
// its renewal (fenced by the job's token), and the lease lengths a handler may
// ask for.
import { QueueErrorCode, QueueInputError } from '../errors.js';
import type { ShardKeys } from '../keys.js';
import type { Queue } from '../producer/queue.js';
import { type RedisClient, runExtend } from '../scripts/scripts.js';
import type { Job, WorkerEvent } from '../types.js';
import { localNow } from '../wake/server-clock.js';

/**
 * A claimed job: `claimedAt`, the local time its claim was asked (its lease
 * runs from a moment after it); `leaseUntil`, the local time before which
 * its lease is surely held (leaseMs from when the claim, or the last
 * renewal that held, was asked).
 */
export type Claimed = { readonly job: Job; readonly claimedAt: number; leaseUntil: number };

/** Longest lease a handler may ask for. */
const MAX_LEASE_MS = 24 * 3_600_000;

/** How long a claimed job's lease is surely held still (ms; 0 or less: lost, or about to be). */
export const leaseLeft = (c: Claimed): number => c.leaseUntil - localNow();

/** A lease length a handler asked for: whole ms, 1 ms to a day (Infinity would pin the job in flight for ever). */
export function checkLease(ms: number): number {
  if (!Number.isSafeInteger(ms) || ms < 1 || ms > MAX_LEASE_MS) {
    throw new QueueInputError(QueueErrorCode.INVALID_OPTIONS, `a lease must be whole ms from 1 to ${MAX_LEASE_MS}: ${ms}`);
  }
  return ms;
}

/** Renews a claimed job's lease to `ms` from now; false when it was lost (its token no longer holds). */
export type ExtendLease = (c: Claimed, ms: number) => Promise<boolean>;

export function createLeaseExtender(o: { queue: Queue; redis: RedisClient; emit: (e: WorkerEvent) => void }): ExtendLease {
  const { queue, redis, emit } = o;
  return async (c, ms) => {
    const { job } = c;
    // Reckoned from when the renewal was asked, before Redis set the new
    // deadline, so leaseUntil never runs past the lease Redis holds.
    const asked = localNow();
    const until = await runExtend(redis, queue.keys[job.shard] as ShardKeys, job.id, job.token, ms);
    if (until === null) {
      emit({ kind: 'stale', queue: queue.name, id: job.id, op: 'extend' });
      c.leaseUntil = Math.min(c.leaseUntil, localNow()); // lost: nothing left
    } else c.leaseUntil = asked + ms;
    return until !== null;
  };
}
