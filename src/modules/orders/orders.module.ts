// Wires the orders slice: queue, repository, service, routes and job handlers.
import type { RedisClient } from '../../core/redis.js';
import type { Config } from '../../config.js';
import type { Db } from '../../core/db.js';
import { httpOf } from '../../core/http/route.js';
import type { Logger } from '../../core/logger.js';
import type { ServiceModule } from '../../core/module.js';
import type { NotificationDispatch } from '../../core/outbox.js';
import { createModuleQueue } from '../../core/module-queue.js';
import { RECONCILE_JOB, ordersJobHandlers, ordersReconcileJob } from './orders.jobs.js';
import { createOrdersRepository } from './orders.repository.js';
import { ordersRoutes } from './orders.routes.js';
import { EXPIRE_JOB, createOrdersService } from './orders.service.js';

export const ORDERS_QUEUE = 'orders';

export type OrdersModuleConfig = Pick<
  Config,
  | 'QUEUE_PREFIX'
  | 'QUEUE_SHARDS'
  | 'QUEUE_MAX_PAYLOAD_BYTES'
  | 'ORDER_PAYMENT_TIMEOUT_SECONDS'
  | 'ORDER_RECONCILE_INTERVAL_SECONDS'
  | 'ORDER_RECONCILE_GRACE_SECONDS'
>;

export function createOrdersModule(deps: {
  db: Db;
  redis: RedisClient;
  config: OrdersModuleConfig;
  log: Logger;
  dispatch: NotificationDispatch;
}) {
  const { config } = deps;
  const log = deps.log.child({ module: 'orders' });
  const queue = createModuleQueue(deps.redis, config, ORDERS_QUEUE, {
    // A database outage must not exhaust an expiry: up to ~20 retries over about an hour.
    [EXPIRE_JOB]: { maxAttempts: 20, backoff: { kind: 'exponential', baseMs: 500, maxMs: 5 * 60_000, jitter: 0.2 } },
    [RECONCILE_JOB]: { maxAttempts: 1_000 },
  });
  const service = createOrdersService({
    repo: createOrdersRepository(deps.db),
    queue,
    dispatch: deps.dispatch,
    log,
    defaultTimeoutSeconds: config.ORDER_PAYMENT_TIMEOUT_SECONDS,
    reconcileGraceSeconds: config.ORDER_RECONCILE_GRACE_SECONDS,
  });
  const everyMs = config.ORDER_RECONCILE_INTERVAL_SECONDS * 1_000;
  const module: ServiceModule & { service: typeof service } = {
    name: 'orders',
    ...httpOf(ordersRoutes(service)),
    queue,
    handlers: ordersJobHandlers(service, log),
    periodic: [ordersReconcileJob(service, everyMs)],
    service,
  };
  return module;
}
