// Builds a queue and workers for a test, each worker on its own connections,
// and tears everything down afterwards.
import type { RedisClient } from '../../src/core/redis.js';
import { createQueue, type JobTypeOptions, type Queue, type QueueOptions } from '../../src/queue/producer/queue.js';
import type { AnyJobHandler, WorkerEvent } from '../../src/queue/types.js';
import { createWorker, type Worker, type WorkerOptions } from '../../src/queue/consumer/worker.js';
import { dropQueue, redisClient, uniqueQueueName } from './redis.js';

export type Harness = {
  redis: RedisClient;
  queue: Queue;
  events: WorkerEvent[];
  startWorker(
    handlers: Record<string, AnyJobHandler>,
    opts?: Partial<Omit<WorkerOptions, 'queue' | 'redis' | 'handlers'>>,
  ): Promise<{ worker: Worker; redis: RedisClient }>;
  close(): Promise<void>;
};

/** `options`: the queue's other options (priorityAgingMs...). */
export function harness(
  tag: string,
  types: Record<string, JobTypeOptions>,
  shards = 1,
  options: Partial<Omit<QueueOptions, 'name' | 'types' | 'shards'>> = {},
): Harness {
  const redis = redisClient(`${tag}-producer`);
  const name = uniqueQueueName(tag);
  const queue = createQueue(redis, { ...options, name, types, shards });
  const events: WorkerEvent[] = [];
  const started: { worker: Worker; redis: RedisClient }[] = [];
  let stopped = false;
  return {
    redis,
    queue,
    events,
    async startWorker(handlers, opts = {}) {
      const wr = redisClient(`w-${name}`);
      const worker = createWorker({ queue, redis: wr, handlers, onEvent: (e) => events.push(e), ...opts });
      await worker.start();
      const entry = { worker, redis: wr };
      started.push(entry);
      return entry;
    },
    async close() {
      if (stopped) return;
      stopped = true;
      await Promise.all(started.map((s) => s.worker.stop()));
      for (const s of started) s.redis.disconnect();
      await dropQueue(redis, name);
      redis.disconnect();
    },
  };
}

/** A promise with its resolver, for handlers that wait on the test. */
export function gate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((r) => (open = r));
  return { promise, open };
}
