// A worker run as a child process by the rate-limit test: one queue under a
// key prefix of the test's, the queue limiter with the rules it is given,
// and a handler that POSTs to the job's `url` (the receiver's 429 with
// Retry-After slows the job's `endpoint`) and then prints one JSON line per
// job it ran: its id, when (ms), its attempt and its endpoint.
import { createWebhookPool } from '../../src/core/webhook-call.js';
import { createQueue } from '../../src/queue/producer/queue.js';
import { createWorker } from '../../src/queue/consumer/worker.js';
import { type Job, type QueueLogger, createQueueLimiter, parseRules } from '../../src/queue/index.js';
import { redisClient } from './redis.js';

type LimitedJob = { url: string; endpoint: string };
const limitedJobKey = (job: Job) => (job.payload as LimitedJob).endpoint;

const [prefix, queueName, rules] = process.argv.slice(2) as [string, string, string];
const redis = redisClient('limited-worker');
// Warnings and errors to stderr, which the test shows when it fails.
const log: QueueLogger = { debug() {}, info() {}, warn: (o, m) => console.error(m, o), error: (o, m) => console.error(m, o) };
const queue = createQueue(redis, { name: queueName, prefix, types: { t: { limitKey: limitedJobKey } } });
const limiter = createQueueLimiter({ redis, prefix, rules: parseRules(rules), log });
await limiter.start();
const call = createWebhookPool(5_000, 'the job');
const worker = createWorker({
  queue,
  redis,
  limiter,
  log,
  concurrency: 20,
  handlers: {
    t: async (job) => {
      const p = job.payload as LimitedJob;
      await call(new URL(p.url), JSON.stringify({ id: job.id }), {}, new AbortController().signal);
      process.stdout.write(`${JSON.stringify({ id: job.id, pid: process.pid, at: Date.now(), attempts: job.attempts, endpoint: p.endpoint })}\n`);
    },
  },
});
await worker.start();
process.stdout.write('READY\n');
process.on('SIGTERM', () => {
  limiter.stop();
  void worker.stop().then(() => process.exit(0));
});
