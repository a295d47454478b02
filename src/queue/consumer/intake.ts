// Claimed records into jobs for the pool: each read by the record format, one
// that cannot be read dead-lettered alone, what a late claim brought beyond
// the pool's room handed back at once, and what a claim asked before a pause
// was announced brings after it handed back too (at its due time).
import { handBackAtDue } from './hand-back.js';
import type { Claimed } from './lease.js';
import type { ShardKeys } from '../keys.js';
import type { Queue } from '../producer/queue.js';
import { parseRecord } from '../record.js';
import { type ClaimedRaw, type RedisClient, runNack, runRelease } from '../scripts/scripts.js';
import type { Job, QueueLogger } from '../types.js';

export type IntakeOptions = {
  readonly queue: Queue;
  readonly redis: RedisClient;
  readonly log: QueueLogger;
  readonly leaseMs: number;
  readonly pool: { room(): number; add(c: Claimed): void; pump(): void };
  /**
   * Whether a pause was announced after a claim asked at `claimedAt` (local
   * ms): such a claim may have run just before the pause, and its answer,
   * come after the announcement, missed the hand-back of jobs not started.
   */
  readonly pausedSince?: (claimedAt: number) => boolean;
};

/** Hands a shard's claimed jobs to the pool (the shard poller's `accept`). */
export type Accept = (raws: ClaimedRaw[], shard: number, claimedAt: number, late: boolean) => void;

export function createIntake(o: IntakeOptions): Accept {
  const { queue, redis, log, pool } = o;
  return (raws, shard, claimedAt, late) => {
    // A claim that answered after its timeout may bring more than there is room
    // for now (or land during shutdown): the rest goes back at once, not after
    // its lease. (Claims answered in time asked for what there was room for;
    // the shards' claims may overlap a little, which the pool absorbs.)
    const held = o.pausedSince?.(claimedAt) ?? false;
    const space = held ? 0 : late ? Math.max(0, pool.room()) : Number.POSITIVE_INFINITY;
    const k = queue.keys[shard] as ShardKeys;
    const surplus: Job[] = [];
    let taken = 0;
    for (const raw of raws) {
      let job: Job;
      try {
        job = jobOf(queue, raw, shard);
      } catch (err) {
        // The claim script reads records by the same rule, so this is a bug or a
        // hand-edited key; one job must not take the worker down with it.
        void deadLetterUnreadable(o, k, raw, err);
        continue;
      }
      if (taken >= space) {
        surplus.push(job);
        continue;
      }
      pool.add({ job, claimedAt, leaseUntil: claimedAt + o.leaseMs });
      taken++;
    }
    if (surplus.length > 0 && held) {
      void handBackAtDue(o, surplus).then(
        (n) => n > 0 && log.info({ queue: queue.name, released: n }, 'queue paused: jobs of a claim answered after the pause handed back'),
      );
    } else if (surplus.length > 0) {
      runRelease(redis, k, surplus).catch((err: unknown) =>
        log.error({ err, queue: queue.name, count: surplus.length }, 'release failed; jobs return after their lease'),
      );
    }
    pool.pump();
  };
}

function jobOf(queue: Queue, raw: ClaimedRaw, shard: number): Job {
  const rec = parseRecord(raw.record);
  const maxAttempts = queue.maxAttemptsOf(rec.type, rec.maxAttempts);
  return {
    queue: queue.name,
    shard,
    id: raw.id,
    type: rec.type,
    payload: rec.payload,
    attempts: rec.attempts,
    maxAttempts,
    lastAttempt: rec.attempts >= maxAttempts,
    dueAt: raw.dueAt,
    token: rec.token,
  };
}

async function deadLetterUnreadable(o: IntakeOptions, k: ShardKeys, raw: ClaimedRaw, err: unknown): Promise<void> {
  const { queue, redis, log } = o;
  log.error({ err, queue: queue.name, jobId: raw.id }, 'claimed job record unreadable; dead-lettering it');
  const token = Number(/^(\d+),/.exec(raw.record)?.[1] ?? NaN);
  if (!Number.isSafeInteger(token)) return; // not even a token: it returns after its lease and the claim parks it
  try {
    await runNack(redis, k, raw.id, token, 'dead', 0, `unreadable job record: ${String(err)}`.slice(0, 2_000));
  } catch (nackErr) {
    log.error({ err: nackErr, queue: queue.name, jobId: raw.id }, 'dead-lettering failed; the job returns after its lease');
  }
}
