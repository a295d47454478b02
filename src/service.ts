// The composition root: starts the service's parts for one role (database,
// external or embedded, and its migrations; Redis; the domain modules; then
// the HTTP API and/or the queue workers: src/composition/) and returns a
// stop() that takes them down in reverse order. main.ts calls this; tests call
// it in-process.
import { writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type { Express } from 'express';
import { startHttp } from './composition/http.js';
import { type Stack, createStack } from './composition/stack.js';
import { REDIS_START_TIMEOUT_MS, duringStartUp } from './composition/start-up.js';
import { startWorkers } from './composition/workers.js';
import { startRateLimits } from './composition/rate-limits.js';
import type { Config } from './config.js';
import { type ApiKeyStore, apiKeyStore } from './core/auth/api-keys.js';
import { SCOPES } from './core/auth/scopes.js';
import { DEFAULT_CLIENT } from './core/auth/api-key-input.js';
import { type ClientWebhookSecrets, createClientWebhookSecrets } from './core/client-webhook-secrets.js';
import { createDb } from './core/db.js';
import { startEmbeddedDb } from './core/embedded-db.js';
import type { Logger } from './core/logger.js';
import { createMetrics } from './core/metrics.js';
import { migrate } from './core/migrate.js';
import { maskUrlPassword } from './core/url-password.js';
import type { ServiceModule } from './core/module.js';
import { type RedisClient, closeRedis, createRedis, redisTargetOf, whenReady } from './core/redis.js';
import { createAppointmentsModule } from './modules/appointments/appointments.module.js';
import { createNotificationsModule } from './modules/notifications/notifications.module.js';
import type { Notifier } from './modules/notifications/notifier.js';
import { createOrdersModule } from './modules/orders/orders.module.js';
import { createParcelsModule } from './modules/parcels/parcels.module.js';
import { createReportsModule } from './modules/reports/reports.module.js';
import { createTimersModule } from './modules/timers/timers.module.js';
import { checkEvictionPolicy, checkQueueLayout } from './queue/index.js';

/** Connections of the main pool kept open while idle (on an outside database). */
const KEEP_OPEN = 4;

/** Connections of the parcel flusher's own pool (worker roles on an outside database). */
const FLUSH_POOL_SIZE = 6;

/** Under the embedded database's directory: the development API key. */
export const DEV_KEY_FILE = 'dev-api-key';

export const ROLES = ['all', 'api', 'worker', 'migrate'] as const;
export type Role = (typeof ROLES)[number];

export type RunningService = {
  /** Port the API listens on (0 when the role has no API). */
  readonly port: number;
  readonly modules: readonly ServiceModule[];
  /** The module of that name (orders, appointments, parcels, notifications, reports, timers); throws for another. */
  module(name: string): ServiceModule;
  /** The express app, when the role serves the API (tests walk its routes). */
  readonly app?: Express;
  /** The shared Redis connection (API calls, producers). */
  readonly redis?: RedisClient;
  /** The clients' webhook signing secrets (absent in the migrate role): the admin API's, and the timers' signing keys. */
  readonly clientSecrets?: ClientWebhookSecrets;
  stop(): Promise<void>;
};

export type ServiceOptions = {
  /** Replaces the notifier chosen from the config (tests). */
  readonly notifier?: Notifier;
};

export async function startService(config: Config, role: Role, log: Logger, options: ServiceOptions = {}): Promise<RunningService> {
  const stack = createStack(log);
  try {
    return await start(config, role, log, options, stack);
  } catch (err) {
    await stack.stop();
    throw err;
  }
}

async function start(config: Config, role: Role, log: Logger, options: ServiceOptions, stack: Stack): Promise<RunningService> {
  const stop = () => stack.stop();
  const { url: databaseUrl, embeddedDir } = await database(config, role, log, stack);
  await migrate(databaseUrl, log);
  if (role === 'migrate') return { port: 0, modules: [], module: moduleOf([]), stop };

  // The embedded database takes one connection, kept open for the service's
  // life (opened by the first query below): a slot that went free when idle
  // would be there for anything else able to reach the socket.
  // A few connections stay open while idle: the first burst after a quiet
  // spell (timers firing at once) would otherwise wait for new connections.
  const db = config.DATABASE_URL
    ? createDb(databaseUrl, config.DATABASE_POOL_SIZE, Math.min(KEEP_OPEN, config.DATABASE_POOL_SIZE))
    : createDb(databaseUrl, 1, 1);
  stack.push({ name: 'postgres', stop: () => db.$disconnect() });
  if (embeddedDir) await ensureDevelopmentKey(apiKeyStore(db), embeddedDir, log);
  const clientSecrets = createClientWebhookSecrets(db);
  // Deadline-bound background work (the parcel flusher) gets connections of its
  // own in the worker roles; the embedded database has a single connection.
  // Its commits run side by side: while some wait for a slow WAL flush, the
  // next due batch still starts at once on another connection (with 2, the
  // parcel load test saw batches formed up to ~350 ms late while commits took
  // that long and 5 were pending).
  let flushDb = db;
  if (config.DATABASE_URL && role !== 'api') {
    const own = createDb(databaseUrl, FLUSH_POOL_SIZE, 2);
    stack.push({ name: 'postgres:flusher', stop: () => own.$disconnect() });
    flushDb = own;
  }
  const target = redisTargetOf(config);
  const redis = createRedis(target, `ots-${role}`, { log });
  stack.push({ name: 'redis', stop: () => closeRedis(redis) });
  await whenReady(redis, REDIS_START_TIMEOUT_MS);
  await checkEvictionPolicy(redis, log);

  const metrics = createMetrics();
  // Notifications first: the other domains hand their outbox rows to its dispatch.
  const notifications = createNotificationsModule({ db, redis, config, log, ...(options.notifier && { notifier: options.notifier }) });
  const { dispatch } = notifications;
  const parcels = createParcelsModule({
    db,
    flushDb,
    redis,
    connect: async (name) => {
      // The module closes it when its work stops.
      const c = createRedis(target, name, { log });
      await whenReady(c, REDIS_START_TIMEOUT_MS).catch((err: unknown) => {
        c.disconnect();
        throw err;
      });
      return c;
    },
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
    createTimersModule({ db, redis, config, log, keysFor: (client) => clientSecrets.keysFor(client) }),
  ];

  await duringStartUp(
    () =>
      checkQueueLayout(
        redis,
        modules.map((m) => m.queue),
      ),
    'queue layout check',
    log,
  );
  metrics.watchQueues(modules.map((m) => m.queue));
  for (const m of modules) m.queue.onScheduled((n) => metrics.scheduled(m.queue.name, n));

  const rateLimits = await startRateLimits({ config, log, redis, db, metrics, stack });
  if (role === 'all' || role === 'worker') await startWorkers({ config, log, target, redis, modules, metrics, stack, limiter: rateLimits.limiter });
  let http: { port: number; app?: Express } = { port: 0 };
  if (role === 'all' || role === 'api') {
    const reads = {
      recentBatches: (limit: number, client?: string) => parcels.service.recentBatches(limit, client),
      dailyReports: (limit: number) => reports.latest(limit),
    };
    http = await startHttp({ config, log, redis, db, modules, metrics, reads, clientSecrets, stack, rateLimits });
  }
  return { ...http, modules, module: moduleOf(modules), redis, clientSecrets, stop };
}

function moduleOf(modules: readonly ServiceModule[]): (name: string) => ServiceModule {
  return (name) => {
    const m = modules.find((x) => x.name === name);
    if (!m) throw new Error(`no module named ${name} (there are: ${modules.map((x) => x.name).join(', ')})`);
    return m;
  };
}

/** The PostgreSQL URL to use, starting the embedded database (and naming its directory) when none is configured. */
async function database(config: Config, role: Role, log: Logger, stack: Stack): Promise<{ url: string; embeddedDir?: string }> {
  if (config.DATABASE_URL) {
    log.info({ database: maskUrlPassword(config.DATABASE_URL) }, 'using PostgreSQL from DATABASE_URL');
    return { url: config.DATABASE_URL };
  }
  if (role === 'api' || role === 'worker') {
    // Two processes opening one embedded data directory would corrupt it.
    throw new Error(`the ${role} role alone needs DATABASE_URL; the embedded database serves only the all-in-one role`);
  }
  const embedded = await startEmbeddedDb(config.DATA_DIR);
  stack.push({ name: 'embedded-db', stop: () => embedded.stop() });
  log.warn({ dataDir: embedded.dataDir }, 'DATABASE_URL not set: using the embedded PostgreSQL (PGlite); for development, not production');
  return { url: embedded.url, embeddedDir: resolve(config.DATA_DIR) };
}

/**
 * The newcomer's key: on the embedded database, before any key exists, one
 * with every scope, kept in <data dir>/dev-api-key (owner only) so the
 * README's examples work. The key itself is shown once on an interactive
 * terminal, never in the logs (which go wherever logs go): they name the file.
 */
async function ensureDevelopmentKey(keys: ApiKeyStore, dataDir: string, log: Logger): Promise<void> {
  if (await keys.any()) return;
  const made = await keys.create('development', SCOPES, DEFAULT_CLIENT);
  const file = join(dataDir, DEV_KEY_FILE);
  await writeFile(file, `${made.key}\n`, { mode: 0o600 });
  log.warn({ keyId: made.id, file, scopes: made.scopes }, 'made a development API key with every scope; it is in the file');
  if (process.stderr.isTTY) process.stderr.write(`\nDevelopment API key (shown this once; also in ${file}):\n  ${made.key}\n\n`);
}
