// Our delay queue behind the benchmark's BenchQueue shape: a producer
// connection for scheduling and stats, and a separate connection per worker,
// as a separate worker process would have.
import { Redis } from 'ioredis';
import { createQueue } from '../src/queue/producer/queue.js';
import { createWorker } from '../src/queue/consumer/worker.js';
import { type QueueLimiter, createQueueLimiter } from '../src/queue/limits/queue-limiter.js';
import { silentLogger } from '../src/queue/types.js';
import { CONTROL_LIMIT, benchRecordGroups } from './bench-config.js';
import { type BenchQueue, type QueueIds, type WorkerHooks, businessId } from './bench-engine.js';
import { PAYLOAD, dropKeys, keysStorage } from './bench-util.js';

const connect = (url: string, name: string) => new Redis(url, { connectionName: name, maxRetriesPerRequest: null });

/** Job n's priority with the controls on: the ten priorities in turn (5, the default, among them). */
const priorityOf = (n: number) => n % 10;

/** `controls`: jobs of ten priorities, and workers judged by a queue rate limit far above the load. */
export function openOurs(redisUrl: string, ids: QueueIds, controls = false): BenchQueue {
  const redis = connect(redisUrl, 'bench-ours-producer');
  // The service's default record layout unless BENCH_RECORD_GROUPS says otherwise.
  const queue = createQueue(redis, { name: ids.name, prefix: ids.prefix, types: { noop: {} }, recordGroups: benchRecordGroups() });
  const workerConnections: Redis[] = [];
  const limiters: QueueLimiter[] = [];

  async function prepareWorker(concurrency: number, hooks: WorkerHooks) {
    const wr = connect(redisUrl, 'bench-ours-worker');
    workerConnections.push(wr);
    await wr.ping();
    const onStart = hooks.onStart;
    const onCompleted = hooks.onCompleted;
    let engineMs: number | undefined;
    let limiter: QueueLimiter | undefined;
    if (controls) {
      limiter = createQueueLimiter({ redis: wr, prefix: ids.prefix, rules: [{ scope: ids.name, ...CONTROL_LIMIT }], log: silentLogger });
      await limiter.start();
      limiters.push(limiter);
    }
    const worker = createWorker({
      queue,
      redis: wr,
      concurrency,
      ...(limiter && { limiter }),
      handlers: {
        noop: async (job) => {
          onStart?.(Date.now() - job.dueAt, engineMs);
        },
      },
      onEvent: (e) => {
        // 'started' is emitted synchronously just before the handler runs.
        if (e.kind === 'started') engineMs = e.latenessMs;
        else if (e.kind === 'completed') onCompleted?.();
      },
    });
    return {
      start: () => worker.start(),
      stop: async () => {
        await worker.stop();
      },
    };
  }

  return {
    ids,
    store: 'redis',
    async init() {
      await redis.ping();
    },
    storage: () => keysStorage(redisUrl, `${ids.prefix}:{${ids.name}:*`),
    async addDelayed(jobs) {
      await queue.scheduleMany(
        jobs.map((j) => ({ id: businessId(j.n), type: 'noop', payload: PAYLOAD, delayMs: j.delayMs, ...(controls && { priority: priorityOf(j.n) }) })),
      );
    },
    async addAt(jobs) {
      await queue.scheduleMany(jobs.map((j) => ({ id: businessId(j.n), type: 'noop', payload: PAYLOAD, at: j.dueAt })));
    },
    async addDue(ns) {
      await queue.scheduleMany(
        ns.map((n) => ({ id: businessId(n), type: 'noop', payload: PAYLOAD, delayMs: 0, ...(controls && { priority: priorityOf(n) }) })),
      );
    },
    async counts() {
      const s = await queue.stats();
      return { waiting: s.pending, active: s.inFlight };
    },
    prepareWorker,
    async drop() {
      await dropKeys(redisUrl, `${ids.prefix}:{${ids.name}:*`);
    },
    async close() {
      for (const l of limiters) l.stop();
      for (const c of workerConnections) c.disconnect();
      await redis.quit();
    },
  };
}
