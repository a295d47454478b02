// Wires the orders slice: queue, repository, service, routes, job handlers and reconciliation pass.
import type { RedisClient } from '../../core/redis.js';
import type { Config } from '../../config.js';
import type { Db } from '../../core/db.js';
import { httpOf } from '../../core/http/route.js';
import type { Logger } from '../../core/logger.js';
import type { ServiceModule } from '../../core/module.js';
import type { NotificationDispatch } from '../../core/delivery/index.js';
import { DATABASE_JOB_OPTIONS, PERIODIC_JOB_OPTIONS, type QueueConfig, createModuleQueue } from '../../core/module-queue.js';
import { type RetentionConfig, createRetentionJob, retentionJobType } from '../../core/retention.js';
import { ordersJobHandlers } from './orders.jobs.js';
import { RECONCILE_JOB, createOrdersReconcile } from './orders.reconcile.js';
import { createOrdersRepository } from './orders.repository.js';
import { ordersRoutes } from './orders.routes.js';
import { EXPIRE_JOB, REMIND_JOB, createOrdersService } from './orders.service.js';

export const ORDERS_QUEUE = 'orders';

export type OrdersModuleConfig = QueueConfig &
  RetentionConfig &
  Pick<
    Config,
    | 'ORDER_PAYMENT_TIMEOUT_SECONDS'
    | 'ORDER_RECONCILE_INTERVAL_SECONDS'
    | 'ORDER_RECONCILE_GRACE_SECONDS'
    | 'ORDER_MAX_WINDOW_SECONDS'
    | 'PAYMENT_REMINDER_BEFORE_SECONDS'
    | 'ADMIN_TOKEN'
  >;

export function createOrdersModule(deps: { db: Db; redis: RedisClient; config: OrdersModuleConfig; log: Logger; dispatch: NotificationDispatch }) {
  const { config } = deps;
  const log = deps.log.child({ module: 'orders' });
  const queue = createModuleQueue(deps.redis, config, ORDERS_QUEUE, {
    [EXPIRE_JOB]: DATABASE_JOB_OPTIONS,
    [REMIND_JOB]: DATABASE_JOB_OPTIONS,
    [RECONCILE_JOB]: PERIODIC_JOB_OPTIONS,
    [retentionJobType(ORDERS_QUEUE)]: PERIODIC_JOB_OPTIONS,
  });
  const repo = createOrdersRepository(deps.db);
  const service = createOrdersService({
    repo,
    queue,
    dispatch: deps.dispatch,
    log,
    defaultTimeoutSeconds: config.ORDER_PAYMENT_TIMEOUT_SECONDS,
    maxWindowSeconds: config.ORDER_MAX_WINDOW_SECONDS,
    reminderBeforeSeconds: config.PAYMENT_REMINDER_BEFORE_SECONDS,
  });
  const reconcile = createOrdersReconcile({
    repo,
    queue,
    dispatch: deps.dispatch,
    remindMany: service.remindMany,
    log,
    graceSeconds: config.ORDER_RECONCILE_GRACE_SECONDS,
    everyMs: config.ORDER_RECONCILE_INTERVAL_SECONDS * 1_000,
  });
  const retention = createRetentionJob(ORDERS_QUEUE, repo.retention, config, log);
  const module: ServiceModule & { service: typeof service; reconcile: typeof reconcile } = {
    name: 'orders',
    ...httpOf(ordersRoutes(service, config.ADMIN_TOKEN)),
    queue,
    handlers: ordersJobHandlers(service, log),
    periodic: [reconcile.job, retention],
    service,
    reconcile,
  };
  return module;
}
