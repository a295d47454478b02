// A worker run as a child process by the pause test: one queue of job types
// a and b, on the Redis of REDIS_URL; its handler prints one JSON line as it
// starts each job (id, type, due time, when, pid), then works a few ms.
import { createQueue } from '../../src/queue/producer/queue.js';
import { createWorker } from '../../src/queue/consumer/worker.js';
import type { Job } from '../../src/queue/types.js';
import { redisClient } from './redis.js';

const [queueName] = process.argv.slice(2);
const redis = redisClient('pause-worker');
const queue = createQueue(redis, { name: queueName as string, types: { a: {}, b: {} } });
const handler = async (job: Job) => {
  process.stdout.write(`${JSON.stringify({ id: job.id, type: job.type, due: job.dueAt, at: Date.now(), pid: process.pid })}\n`);
  await new Promise((r) => setTimeout(r, 5));
};
const worker = createWorker({ queue, redis, concurrency: 8, handlers: { a: handler, b: handler } });
await worker.start();
process.stdout.write('READY\n');
process.on('SIGTERM', () => void worker.stop().then(() => process.exit(0)));
