// What a failed delivery becomes: handed back with its attempt refunded when
// shutdown cut it short, retried after its type's backoff, or dead-lettered
// with its last error once it is out of attempts or not retryable. Always
// fenced by the delivery's token: a worker that lost the lease changes nothing.
import { retryDelayMs } from '../backoff.js';
import { NonRetryableError } from '../errors.js';
import type { ShardKeys } from '../keys.js';
import type { Queue } from '../producer/queue.js';
import { NackCode, type RedisClient, runNack, runRelease } from '../scripts/scripts.js';
import type { Job, QueueLogger, WorkerEvent } from '../types.js';

const MAX_ERROR_CHARS = 2_000;

export function createFailureHandler(o: {
  queue: Queue;
  redis: RedisClient;
  log: QueueLogger;
  emit: (e: WorkerEvent) => void;
  /** Aborted when the worker's shutdown grace period ends. */
  shutdown: AbortSignal;
}): (job: Job, err: unknown) => Promise<void> {
  const { queue, redis, log, emit } = o;
  return async (job, err) => {
    const k = queue.keys[job.shard] as ShardKeys;
    // Cut short by shutdown, not failed: hand it back with the attempt
    // refunded. Not a NonRetryableError, though: that is the handler's final
    // word whatever the shutdown (a receiver's refusal, recorded as final),
    // and handed back it would come back as a fresh attempt and run again.
    if (o.shutdown.aborted && !(err instanceof NonRetryableError)) {
      await runRelease(redis, k, [{ id: job.id, token: job.token }]);
      return;
    }
    const message = errorText(err);
    const final = err instanceof NonRetryableError || job.lastAttempt;
    const delay = final ? 0 : retryDelayMs(queue.backoffOf(job.type), job.attempts);
    try {
      const r = await runNack(redis, k, job.id, job.token, final ? 'dead' : 'retry', delay, message);
      if (r.code === NackCode.STALE) emit({ kind: 'stale', queue: queue.name, id: job.id, op: 'nack' });
      else if (r.code === NackCode.DEAD) {
        log.warn({ queue: queue.name, jobId: job.id, attempts: job.attempts, error: message }, 'job dead-lettered');
        emit({ kind: 'dead', job, error: message });
      } else {
        log.info({ queue: queue.name, jobId: job.id, attempts: job.attempts, retryAt: r.at, error: message }, 'job failed; retry scheduled');
        emit({ kind: 'retried', job, retryAt: r.at, error: message });
      }
    } catch (nackErr) {
      // The lease still runs: the job is delivered again when it expires.
      log.error({ err: nackErr, queue: queue.name, jobId: job.id }, 'nack failed; job will be redelivered after its lease');
    }
  };
}

function errorText(err: unknown): string {
  const text = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
  return text.length > MAX_ERROR_CHARS ? `${text.slice(0, MAX_ERROR_CHARS)}…` : text;
}
