// Starts the service's parts for one role: database (external or embedded),
// migrations, Redis, the domain modules, then the HTTP API and/or the queue
// workers. Returns a stop() that takes them down in reverse order. main.ts
// calls this; tests call it in-process.
import type { Server } from 'node:http';
import type { Express } from 'express';
import { createApp } from './app.js';
import type { Config } from './config.js';
import { createDb } from './core/db.js';
import { createMetrics } from './core/metrics.js';
import { startEmbeddedDb } from './core/embedded-db.js';
import type { Logger } from './core/logger.js';
import { migrate } from './core/migrate.js';
import type { ServiceModule } from './core/module.js';
import { createRedis } from './core/redis.js';
import { adminRoutes } from './modules/admin/admin.routes.js';
import { dashboardRoutes } from './modules/admin/dashboard.routes.js';
import { createAppointmentsModule } from './modules/appointments/appointments.module.js';
import { createNotificationsModule } from './modules/notifications/notifications.module.js';
import type { Notifier } from './modules/notifications/notifier.js';
import { createOrdersModule } from './modules/orders/orders.module.js';
import { createParcelsModule } from './modules/parcels/parcels.module.js';
import { createReportsModule } from './modules/reports/reports.module.js';
import { checkEvictionPolicy } from './queue/eviction-check.js';
import { checkQueueLayout } from './queue/layout-check.js';
import { createLatenessReader } from './queue/lateness-reader.js';
import { createLatenessRecorder } from './queue/lateness-recorder.js';
import { periodicHandler, startPeriodicKeeper } from './queue/periodic.js';
import { createWorker } from './queue/worker.js';

/** Connections of the parcel flusher's own pool (worker roles on an outside database). */
const FLUSH_POOL_SIZE = 6;

export const ROLES = ['all', 'api', 'worker', 'migrate'] as const;
export type Role = (typeof ROLES)[number];

export type RunningService = {
  /** Port the API listens on (0 when the role has no API). */
  readonly port: number;
  readonly modules: readonly ServiceModule[];
  /** The express app, when the role serves the API (tests walk its routes). */
  readonly app?: Express;
  stop(): Promise<void>;
};

type Step = { name: string; stop: () => Promise<unknown> | void };

export type ServiceOptions = {
  /** Replaces the notifier chosen from the config (tests). */
  readonly notifier?: Notifier;
};

export async function startService(config: Config, role: Role, log: Logger, options: ServiceOptions = {}): Promise<RunningService> {
  const stack: Step[] = [];
  const stop = async () => {
    for (const s of stack.reverse()) {
      try {
        await s.stop();
      } catch (err) {
        log.error({ err, component: s.name }, 'error while stopping');
      }
    }
    stack.length = 0;
  };
  try {
    return await start(config, role, log, options, stack, stop);
  } catch (err) {
    await stop();
    throw err;
  }
}

async function start(
  config: Config,
  role: Role,
  log: Logger,
  options: ServiceOptions,
  stack: Step[],
  stop: () => Promise<void>,
): Promise<RunningService> {
  const databaseUrl = await database(config, role, log, stack);
  await migrate(databaseUrl, log);
  if (role === 'migrate') return { port: 0, modules: [], stop };

  const db = createDb(databaseUrl, config.DATABASE_URL ? config.DATABASE_POOL_SIZE : 1);
  stack.push({ name: 'postgres', stop: () => db.$disconnect() });
  // Deadline-bound background work (the parcel flusher) gets connections of its
  // own in the worker roles; the embedded database has a single connection.
  // Its commits run side by side: while some wait for a slow WAL flush, the
  // next due batch still starts at once on another connection (with 2, the
  // parcel load test saw batches formed up to ~350 ms late while commits took
  // that long and 5 were pending; measured 2026-11-22).
  let flushDb = db;
  if (config.DATABASE_URL && role !== 'api') {
    const own = createDb(databaseUrl, FLUSH_POOL_SIZE, 2);
    stack.push({ name: 'postgres:flusher', stop: () => own.$disconnect() });
    flushDb = own;
  }
  const target = { url: config.REDIS_URL, clusterNodes: config.REDIS_CLUSTER_NODES };
  const redis = createRedis(target, `ots-${role}`, { log });
  stack.push({ name: 'redis', stop: () => redis.quit() });
  await checkEvictionPolicy(redis, log);

  const metrics = createMetrics();
  // Notifications first: the other domains hand their outbox rows to its dispatch.
  const notifications = createNotificationsModule({ db, redis, config, log, ...(options.notifier && { notifier: options.notifier }) });
  const { dispatch } = notifications;
  const parcels = createParcelsModule({
    db,
    flushDb,
    redis,
    connect: (name) => createRedis(target, name, { lazyConnect: true, log }),
    config,
    log,
    dispatch,
    onBatch: (reason) => metrics.batchCommitted(reason),
  });
  const reports = createReportsModule({ db, redis, config, log });
  const modules: ServiceModule[] = [
    createOrdersModule({ db, redis, config, log, dispatch }),
    createAppointmentsModule({ db, redis, config, log, dispatch }),
    parcels,
    notifications,
    reports,
  ];

  await checkQueueLayout(redis, modules.map((m) => m.queue));
  metrics.watchQueues(modules.map((m) => m.queue));
  for (const m of modules) m.queue.onScheduled((n) => metrics.scheduled(m.queue.name, n));

  if (role === 'all' || role === 'worker') {
    // Lateness per second into Redis for the dashboard, whichever process serves it.
    // Stopped after the workers (pushed before them), so their last starts are written.
    const lateness = createLatenessRecorder({ redis, prefix: config.QUEUE_PREFIX, log: log.child({ component: 'lateness' }) });
    lateness.start();
    stack.push({ name: 'lateness-recorder', stop: () => lateness.stop() });
    for (const m of modules) {
      // Each worker claims on a connection of its own, so no API command queues before a claim.
      const workerRedis = createRedis(target, `ots-worker-${m.queue.name}`, { log });
      stack.push({ name: `redis:worker-${m.name}`, stop: () => workerRedis.quit() });
      const worker = createWorker({
        queue: m.queue,
        redis: workerRedis,
        handlers: { ...m.handlers, ...Object.fromEntries(m.periodic.map((p) => [p.type, periodicHandler(p, log.child({ queue: m.queue.name }))])) },
        concurrency: config.WORKER_CONCURRENCY,
        leaseMs: config.WORKER_LEASE_MS,
        idleRecheckMs: config.WORKER_IDLE_RECHECK_MS,
        shutdownGraceMs: config.SHUTDOWN_GRACE_MS,
        log: log.child({ queue: m.queue.name }),
        onEvent: (e) => {
          metrics.workerEvent(e);
          lateness.onWorkerEvent(e);
        },
      });
      await worker.start();
      stack.push({ name: `worker:${m.name}`, stop: () => worker.stop() });
      const keeper = startPeriodicKeeper(m.queue, m.periodic, log);
      stack.push({ name: `periodic:${m.name}`, stop: () => keeper.stop() });
      for (const b of m.background ?? []) {
        await b.start();
        stack.push({ name: b.name, stop: () => b.stop() });
      }
    }
  }
  let port = 0;
  let app: Express | undefined;
  if (role === 'all' || role === 'api') {
    const routes = modules.map((m) => m.routes);
    if (config.ADMIN_TOKEN) {
      const admin = adminRoutes({
        queues: modules.map((m) => m.queue),
        token: config.ADMIN_TOKEN,
        lateness: createLatenessReader(redis, config.QUEUE_PREFIX),
        recentBatches: (limit) => parcels.service.recentBatches(limit),
        dailyReports: (limit) => reports.latest(limit),
      });
      // The page first: it is public, and the admin table guards everything else under /admin.
      routes.push(dashboardRoutes(), admin);
    } else log.warn('ADMIN_TOKEN not set: the admin API (/admin) and its dashboard are disabled');
    app = createApp({ log, redis, db, routes, metrics });
    const server = await listen(app, config.PORT, config.HOST);
    const addr = server.address();
    port = typeof addr === 'object' && addr ? addr.port : config.PORT;
    log.info({ port }, 'http listening');
    stack.push({ name: 'http', stop: () => closeServer(server) });
  }
  return { port, modules, ...(app && { app }), stop };
}

/** The PostgreSQL URL to use, starting the embedded database when none is configured. */
async function database(config: Config, role: Role, log: Logger, stack: Step[]): Promise<string> {
  if (config.DATABASE_URL) {
    log.info({ database: redactUrl(config.DATABASE_URL) }, 'using PostgreSQL from DATABASE_URL');
    return config.DATABASE_URL;
  }
  if (role === 'api' || role === 'worker') {
    // Two processes opening one embedded data directory would corrupt it.
    throw new Error(`the ${role} role alone needs DATABASE_URL; the embedded database serves only the all-in-one role`);
  }
  const embedded = await startEmbeddedDb(config.DATA_DIR);
  stack.push({ name: 'embedded-db', stop: () => embedded.stop() });
  log.warn({ dataDir: embedded.dataDir }, 'DATABASE_URL not set: using the embedded PostgreSQL (PGlite); for development, not production');
  return embedded.url;
}

function listen(app: ReturnType<typeof createApp>, port: number, host: string): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = app.listen(port, host, (err?: Error) => (err ? reject(err) : resolve(server)));
  });
}

function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeIdleConnections();
  });
}

export function redactUrl(url: string): string {
  return url.replace(/\/\/([^:@/]*):[^@/]*@/, '//$1:***@');
}
