// The queue limiter at the worker: claimed jobs are judged against their
// queue's, type's and endpoint's limits before their handler runs; a job
// refused goes back to due at its booked turn (the attempt refunded, no slot
// held while it waits) and is admitted on that booking when it comes back.
// A handler's ReceiverBusyError (a 429 or 503 with Retry-After) slows its
// endpoint down for every worker.
import { ReceiverBusyError } from '../errors.js';
import type { ShardKeys } from '../keys.js';
import type { Admission, QueueLimiter } from '../limits/queue-limiter.js';
import { normaliseEndpoint } from '../limits/limit-rules.js';
import { type Queue, decodePayload } from '../producer/queue.js';
import { type RedisClient, runRelease } from '../scripts/scripts.js';
import type { Job, QueueLogger } from '../types.js';
import type { Claimed } from './lease.js';

export type LimitGate = {
  /** The jobs that may run now, in order; the others are handed back to come due at their turn. */
  admit(claimed: readonly Claimed[]): Promise<Claimed[]>;
  /** A job (as claimed: payload undecoded) failed with `err`: a receiver's "slow down" slows its endpoint. */
  signal(job: Job, err: unknown): Promise<void>;
};

export function createLimitGate(o: { queue: Queue; redis: RedisClient; limiter: QueueLimiter; log: QueueLogger }): LimitGate {
  const { queue, redis, limiter, log } = o;

  /** The job's endpoint, normalised for a key; null when it names none or its limitKey fails (logged: the job still runs). */
  function endpointOf(job: Job): string | null {
    try {
      const key = queue.endpointOf({ ...job, payload: decodePayload(job.payload as string) });
      return key === null ? null : normaliseEndpoint(key);
    } catch (err) {
      log.warn({ err, queue: queue.name, jobId: job.id }, 'job endpoint not known; only its queue and type limits apply');
      return null;
    }
  }

  async function judge(c: Claimed): Promise<Admission> {
    try {
      return await limiter.admit(queue.name, c.job.type, limiter.endpointsInUse() ? endpointOf(c.job) : null, c.job.id);
    } catch (err) {
      // Redis away: the claim that brought the job worked a moment ago; the
      // job runs rather than wait out its lease and lose an attempt.
      log.warn({ err, queue: queue.name, jobId: c.job.id }, 'rate limit not judged; the job runs');
      return { ok: true };
    }
  }

  async function handBack(c: Claimed, waitMs: number): Promise<void> {
    try {
      await runRelease(redis, queue.keys[c.job.shard] as ShardKeys, [{ id: c.job.id, token: c.job.token }], { delayMs: waitMs });
    } catch (err) {
      log.error({ err, queue: queue.name, jobId: c.job.id }, 'job over its rate limit not handed back; it returns after its lease');
    }
  }

  return {
    async admit(claimed) {
      if (!limiter.concerns(queue.name)) return [...claimed];
      const verdicts = await Promise.all(claimed.map(judge));
      const refused: Promise<void>[] = [];
      const admitted = claimed.filter((c, i) => {
        const v = verdicts[i] as Admission;
        if (!v.ok) refused.push(handBack(c, v.waitMs));
        return v.ok;
      });
      await Promise.all(refused);
      return admitted;
    },
    async signal(job, err) {
      if (!(err instanceof ReceiverBusyError)) return;
      const endpoint = endpointOf(job);
      if (endpoint === null) return;
      try {
        await limiter.slowDown(endpoint, err.retryAfterMs);
      } catch (e) {
        log.warn({ err: e, queue: queue.name, endpoint }, 'endpoint slow-down not recorded');
      }
    },
  };
}
