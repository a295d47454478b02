// The worker role's wiring: for every module a worker on a connection of its
// own (its handlers plus one per periodic job), the keeper of its periodic
// jobs and its background work (the parcel flusher), and the lateness
// recorder the dashboard reads. Every module's consumers stop together, so
// shutdown takes one grace period, not one per module, and none claims while
// another drains.
import type { Config } from '../config.js';
import type { Logger } from '../core/logger.js';
import type { Metrics } from '../core/metrics.js';
import type { ServiceModule } from '../core/module.js';
import { type RedisClient, type RedisTarget, closeRedis, createRedis, whenReady } from '../core/redis.js';
import { type QueueLimiter, createLatenessRecorder, createWorker, periodicHandler, startPeriodicKeeper } from '../queue/index.js';
import { REDIS_START_TIMEOUT_MS } from './start-up.js';
import { type Stack, type Step, stopAll } from './stack.js';

export async function startWorkers(o: {
  config: Config;
  log: Logger;
  target: RedisTarget;
  /** The shared connection (the lateness recorder writes on it). */
  redis: RedisClient;
  modules: readonly ServiceModule[];
  metrics: Metrics;
  stack: Stack;
  /** The process's outbound rate limits, shared through Redis. */
  limiter?: QueueLimiter;
}): Promise<void> {
  const { config, log, stack } = o;
  // Lateness per second into Redis for the dashboard, whichever process serves it.
  // Stopped after the workers (pushed before them), so their last starts are written.
  const lateness = createLatenessRecorder({ redis: o.redis, prefix: config.QUEUE_PREFIX, log: log.child({ component: 'lateness' }) });
  lateness.start();
  stack.push({ name: 'lateness-recorder', stop: () => lateness.stop() });
  const connections: RedisClient[] = [];
  const consumers: Step[] = [];
  stack.push({ name: 'redis:workers', stop: () => Promise.all(connections.map(closeRedis)) });
  stack.push({ name: 'workers', stop: () => stopAll(consumers, log) });
  for (const m of o.modules) {
    // Each worker claims on a connection of its own, so no API command queues before a claim.
    const workerRedis = createRedis(o.target, `ots-worker-${m.queue.name}`, { log });
    connections.push(workerRedis);
    await whenReady(workerRedis, REDIS_START_TIMEOUT_MS);
    const queueLog = log.child({ queue: m.queue.name });
    const worker = createWorker({
      queue: m.queue,
      redis: workerRedis,
      handlers: { ...m.handlers, ...Object.fromEntries(m.periodic.map((p) => [p.type, periodicHandler(p, queueLog)])) },
      concurrency: m.concurrency ?? config.WORKER_CONCURRENCY,
      leaseMs: config.WORKER_LEASE_MS,
      idleRecheckMs: config.WORKER_IDLE_RECHECK_MS,
      shutdownGraceMs: config.SHUTDOWN_GRACE_MS,
      // A claim answered only after its connection's socket timeout is lost with
      // the connection: its deadline in Redis comes well before that.
      // (Half of it, plus the poller's second of slack, stays below it.)
      claimTimeoutMs: Math.floor(config.REDIS_SOCKET_TIMEOUT_MS / 2),
      log: queueLog,
      ...(o.limiter && { limiter: o.limiter }),
      onEvent: (e) => {
        o.metrics.workerEvent(e);
        lateness.onWorkerEvent(e);
      },
    });
    await worker.start();
    consumers.push({ name: `worker:${m.name}`, stop: () => worker.stop() });
    const keeper = startPeriodicKeeper(m.queue, m.periodic, log);
    consumers.push({ name: `periodic:${m.name}`, stop: () => keeper.stop() });
    for (const b of m.background ?? []) {
      await b.start();
      consumers.push({ name: b.name, stop: () => b.stop() });
    }
  }
}
