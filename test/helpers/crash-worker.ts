// A worker run as a child process by the crash test: it claims jobs with a
// short lease, prints each claim (id and fencing token) as a JSON line, and
// never finishes a handler, so the parent can SIGKILL it mid-work.
import { createQueue } from '../../src/queue/producer/queue.js';
import { createWorker } from '../../src/queue/consumer/worker.js';
import { redisClient } from './redis.js';

const [queueName, leaseMs] = process.argv.slice(2);
const redis = redisClient('crash-worker');
const queue = createQueue(redis, { name: queueName as string, types: { t: {} } });
const worker = createWorker({
  queue,
  redis,
  concurrency: 5,
  prefetch: 0,
  leaseMs: Number(leaseMs),
  handlers: {
    t: (job) => {
      process.stdout.write(`${JSON.stringify({ id: job.id, token: job.token })}\n`);
      return new Promise<void>(() => {}); // hangs until the process is killed
    },
  },
});
await worker.start();
process.stdout.write('READY\n');
