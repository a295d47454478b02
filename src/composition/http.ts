// The API role's wiring: the modules' route tables, the operators' (only with
// ADMIN_TOKEN), the express app and its listening server, closed first on stop.
import type { Server } from 'node:http';
import type { Express } from 'express';
import { createApp } from '../app.js';
import { apiKeyStore } from '../core/auth/api-keys.js';
import { apiKeyGuard } from '../core/auth/guard.js';
import { rateLimit } from '../core/rate-limit.js';
import type { Config } from '../config.js';
import type { Db } from '../core/db.js';
import type { Logger } from '../core/logger.js';
import type { Metrics } from '../core/metrics.js';
import type { ServiceModule } from '../core/module.js';
import type { RedisClient } from '../core/redis.js';
import type { AdminDeps } from '../modules/admin/admin.routes.js';
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
  stack: Stack;
}): Promise<{ port: number; app: Express }> {
  const { config, log } = o;
  const routes = o.modules.map((m) => m.routes);
  const keys = apiKeyStore(o.db);
  if (config.ADMIN_TOKEN) {
    routes.push(
      ...operatorRoutes({
        queues: o.modules.map((m) => m.queue),
        keys,
        redrives: Object.fromEntries(o.modules.flatMap((m) => (m.redrives ? [[m.queue.name, m.redrives]] : []))),
        token: config.ADMIN_TOKEN,
        lateness: createLatenessReader(o.redis, config.QUEUE_PREFIX),
        ...o.reads,
      }),
    );
  } else log.warn('ADMIN_TOKEN not set: the admin API (/admin) and its dashboard are disabled');
  const perSecond = config.API_RATE_LIMIT_PER_SECOND;
  const failures = config.AUTH_FAILURES_PER_MINUTE;
  const guard = apiKeyGuard({
    keys,
    perKey: rateLimit(o.redis, config.QUEUE_PREFIX, 'key', perSecond, perSecond),
    failures: rateLimit(o.redis, config.QUEUE_PREFIX, 'authfail', failures / 60, failures),
    log,
  });
  const app = createApp({ log, redis: o.redis, db: o.db, routes, metrics: o.metrics, guard, corsOrigins: config.CORS_ORIGINS });
  const server = await listen(app, config.PORT, config.HOST);
  const addr = server.address();
  const port = typeof addr === 'object' && addr ? addr.port : config.PORT;
  log.info({ port }, 'http listening');
  o.stack.push({ name: 'http', stop: () => closeServer(server) });
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
