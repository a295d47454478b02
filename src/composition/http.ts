// The API role's wiring: the modules' route tables, the operators' (only with
// ADMIN_TOKEN), the express app and its listening server, closed first on stop,
// and with METRICS_PORT the metrics listener beside it.
import type { Server } from 'node:http';
import type { Express } from 'express';
import { createApp } from '../app.js';
import { apiKeyStore } from '../core/auth/api-keys.js';
import { apiKeyGuard } from '../core/auth/guard.js';
import { loadShedder } from '../core/http/load-shed.js';
import { metricsApp } from '../core/http/metrics.routes.js';
import { publicLimit } from '../core/http/public-limit.js';
import { rateLimit } from '../core/rate-limit.js';
import type { ClientWebhookSecrets } from '../core/client-webhook-secrets.js';
import type { Config } from '../config.js';
import type { Db } from '../core/db.js';
import type { Logger } from '../core/logger.js';
import type { Metrics } from '../core/metrics.js';
import type { ServiceModule } from '../core/module.js';
import type { RedisClient } from '../core/redis.js';
import type { AdminDeps } from '../modules/admin/admin.routes.js';
import { createPauseCheck } from '../modules/admin/queue-controls.check.js';
import { queueControlRoutes } from '../modules/admin/queue-controls.routes.js';
import { createQueueControls } from '../modules/admin/queue-controls.service.js';
import { createLatenessReader } from '../queue/index.js';
import { operatorRoutes } from './operator-routes.js';
import type { Stack } from './stack.js';

export async function startHttp(o: {
  config: Config;
  log: Logger;
  redis: RedisClient;
  db: Db;
  modules: readonly ServiceModule[];
  metrics: Metrics;
  /** What the operators' API reads besides the queues (the latest batches and daily reports). */
  reads: Pick<AdminDeps, 'recentBatches' | 'dailyReports'>;
  /** The clients' webhook signing secrets, which the operators' API makes and deletes. */
  clientSecrets: ClientWebhookSecrets;
  stack: Stack;
  /** The outbound rate limits the operators' API shows and changes. */
  rateLimits?: AdminDeps['rateLimits'];
}): Promise<{ port: number; app: Express }> {
  const { config, log } = o;
  const routes = o.modules.map((m) => m.routes);
  const keys = apiKeyStore(o.db);
  const queues = o.modules.map((m) => m.queue);
  // Pauses PostgreSQL intends, re-applied where Redis lost them (with or without the admin API).
  const pauseCheck = createPauseCheck({ db: o.db, queues, log: log.child({ component: 'pause-check' }) });
  pauseCheck.start();
  o.stack.push({ name: 'pause check', stop: () => pauseCheck.stop() });
  if (config.ADMIN_TOKEN) {
    routes.push(
      ...operatorRoutes({
        queues: o.modules.map((m) => m.queue),
        keys,
        secrets: o.clientSecrets,
        redrives: Object.fromEntries(o.modules.flatMap((m) => (m.redrives ? [[m.queue.name, m.redrives]] : []))),
        token: config.ADMIN_TOKEN,
        lateness: createLatenessReader(o.redis, config.QUEUE_PREFIX),
        ...(o.rateLimits && { rateLimits: o.rateLimits }),
        ...o.reads,
      }),
    );
    // Pause and resume: after the dashboard, under the same admin token.
    routes.push(queueControlRoutes({ controls: createQueueControls({ db: o.db, queues }), queueNames: queues.map((q) => q.name), token: config.ADMIN_TOKEN }));
  } else log.warn('ADMIN_TOKEN not set: the admin API (/admin) and its dashboard are disabled');
  const perSecond = config.API_RATE_LIMIT_PER_SECOND;
  const perMinute = config.AUTH_FAILURES_PER_MINUTE;
  // One brake per address for every credential: API keys, the admin token, the metrics token.
  const failures = rateLimit(o.redis, config.QUEUE_PREFIX, 'authfail', perMinute / 60, perMinute);
  const perClient = config.CLIENT_RATE_LIMIT_PER_SECOND;
  const guard = apiKeyGuard({
    keys,
    perKey: rateLimit(o.redis, config.QUEUE_PREFIX, 'key', perSecond, perSecond),
    perClient: rateLimit(o.redis, config.QUEUE_PREFIX, 'client', perClient, perClient),
    failures,
    log,
  });
  // One budget per address across both listeners: they share this process's event loop.
  const limit = publicLimit(config.PUBLIC_RATE_LIMIT_PER_SECOND);
  const metricsToken = config.METRICS_TOKEN;
  const shedder = loadShedder({ thresholdMs: config.API_SHED_EVENT_LOOP_DELAY_MS, log });
  o.stack.push({ name: 'load shedding', stop: () => shedder.stop() });
  const app = createApp({
    log,
    redis: o.redis,
    db: o.db,
    routes,
    metrics: o.metrics,
    metricsRoute: config.METRICS_PORT ? 'elsewhere' : { token: metricsToken },
    publicLimit: limit,
    authFailures: failures,
    guard,
    corsOrigins: config.CORS_ORIGINS,
    shed: shedder.middleware,
  });
  const server = await listen(app, config.PORT, config.HOST);
  shedder.start();
  const addr = server.address();
  const port = typeof addr === 'object' && addr ? addr.port : config.PORT;
  log.info({ port }, 'http listening');
  o.stack.push({ name: 'http', stop: () => closeServer(server) });
  if (config.METRICS_PORT) {
    const host = config.METRICS_HOST ?? config.HOST;
    const own = metricsApp({ metrics: o.metrics, token: metricsToken, log, publicLimit: limit, failures });
    const metricsServer = await listen(own, config.METRICS_PORT, host);
    log.info({ port: config.METRICS_PORT, host }, 'metrics listening');
    o.stack.push({ name: 'metrics http', stop: () => closeServer(metricsServer) });
  }
  return { port, app };
}

function listen(app: Express, port: number, host: string): Promise<Server> {
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
