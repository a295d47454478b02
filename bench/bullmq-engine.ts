// BullMQ behind the benchmark's BenchQueue shape, used its fastest documented
// way: Queue.addBulk (with `delay` for delayed jobs) and a Worker with
// concurrency. A finished job leaves nothing behind (as our ack does) through
// the Worker's removeOnComplete / removeOnFail, BullMQ's documented place for
// them. Set on each job instead, BullMQ stores them in every job's hash (744
// against 364 B per delayed job when the throughput issue was filed): a
// handicap this benchmark's runs before 2026-11-25 carried.
import { Queue, Worker } from 'bullmq';
import { CONTROL_LIMIT } from './bench-config.js';
import { type BenchQueue, type QueueIds, type WorkerHooks } from './bench-engine.js';
import { PAYLOAD, dropKeys, keysStorage } from './bench-util.js';

const REMOVE = { removeOnComplete: { count: 0 }, removeOnFail: { count: 0 } } as const;

function connectionOf(url: string) {
  const u = new URL(url);
  return {
    host: u.hostname,
    port: Number(u.port || 6379),
    ...(u.password ? { password: decodeURIComponent(u.password) } : {}),
    ...(u.pathname.length > 1 ? { db: Number(u.pathname.slice(1)) } : {}),
    maxRetriesPerRequest: null,
  };
}

/**
 * `controls`: jobs of ten priorities (BullMQ's `priority` job option: 1 is
 * the highest, so 1..10 for our 9..0) and a Worker `limiter` far above the load.
 */
export function openBullmq(redisUrl: string, ids: QueueIds, controls = false): BenchQueue {
  const connection = connectionOf(redisUrl);
  const queue = new Queue(ids.name, { connection, prefix: ids.prefix });
  const workers: Worker[] = [];

  async function prepareWorker(concurrency: number, hooks: WorkerHooks) {
    const onStart = hooks.onStart;
    const worker = new Worker(
      ids.name,
      async (job) => {
        // Intended due time as BullMQ itself computes it: the job's timestamp plus its delay.
        onStart?.(Date.now() - (job.timestamp + (job.opts.delay ?? 0)));
      },
      {
        connection,
        prefix: ids.prefix,
        concurrency,
        autorun: false,
        ...REMOVE,
        ...(controls && { limiter: { max: CONTROL_LIMIT.count, duration: CONTROL_LIMIT.intervalMs } }),
      },
    );
    workers.push(worker);
    const onCompleted = hooks.onCompleted;
    if (onCompleted) worker.on('completed', () => onCompleted());
    worker.on('error', (err) => process.stderr.write(`bullmq worker error: ${String(err)}\n`));
    await worker.waitUntilReady();
    return {
      async start() {
        // run() resolves only when the worker closes.
        worker.run().catch((err: unknown) => process.stderr.write(`bullmq worker run failed: ${String(err)}\n`));
      },
      stop: () => worker.close(),
    };
  }

  return {
    ids,
    store: 'redis',
    async init() {
      await queue.waitUntilReady();
    },
    storage: () => keysStorage(redisUrl, `${ids.prefix}:${ids.name}:*`),
    async addDelayed(jobs) {
      await queue.addBulk(jobs.map((j) => ({ name: 'noop', data: PAYLOAD, opts: { delay: j.delayMs, ...(controls && { priority: 10 - (j.n % 10) }) } })));
    },
    async addAt(jobs) {
      // Timestamp + delay is exactly the intended due time (BullMQ scores delayed jobs by it).
      const now = Date.now();
      await queue.addBulk(jobs.map((j) => ({ name: 'noop', data: PAYLOAD, opts: { timestamp: now, delay: Math.max(0, j.dueAt - now) } })));
    },
    async addDue(ns) {
      await queue.addBulk(ns.map((n) => ({ name: 'noop', data: PAYLOAD, ...(controls && { opts: { priority: 10 - (n % 10) } }) })));
    },
    async counts() {
      const c = await queue.getJobCounts('wait', 'delayed', 'prioritized', 'active');
      return { waiting: (c.wait ?? 0) + (c.delayed ?? 0) + (c.prioritized ?? 0), active: c.active ?? 0 };
    },
    prepareWorker,
    async drop() {
      await dropKeys(redisUrl, `${ids.prefix}:${ids.name}:*`, `${ids.prefix}:${ids.name}`);
    },
    async close() {
      await Promise.all(workers.map((w) => w.close()));
      await queue.close();
    },
  };
}
