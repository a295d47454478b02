// Wires notification delivery: its queue, the notifier, the relay, the route,
// and the dispatch port the other domains call after their commits.
import type { RedisClient } from '../../core/redis.js';
import type { Config } from '../../config.js';
import type { Db } from '../../core/db.js';
import { httpOf } from '../../core/http/route.js';
import type { Logger } from '../../core/logger.js';
import type { ServiceModule } from '../../core/module.js';
import { type NotificationDispatch, type NotificationKind, createDeliveries } from '../../core/delivery/index.js';
import { afterCommit } from '../../core/redis-call.js';
import { PERIODIC_JOB_OPTIONS, type QueueConfig, createModuleQueue } from '../../core/module-queue.js';
import { DELIVER_JOB, notificationIdOf, notificationsJobHandlers, scheduleDeliveries } from './notifications.jobs.js';
import { RELAY_JOB, createNotificationsRelay } from './notifications.reconcile.js';
import { createNotificationsRepository } from './notifications.repository.js';
import { notificationsRoutes } from './notifications.routes.js';
import { type Notifier, type WebhookEndpoint, createLoggingNotifier, createRoutingNotifier, createWebhookNotifier } from './notifier.js';

export const NOTIFICATIONS_QUEUE = 'notifications';
/**
 * A row SENDING longer than a call's timeout plus this has lost the delivery
 * that claimed it (a live one records the outcome well within it, its database
 * writes retried for about 2 s).
 */
const SENDING_MARGIN_MS = 5_000;

export type NotificationsModuleConfig = QueueConfig &
  Pick<
    Config,
    | 'DELIVERY_CONCURRENCY'
    | 'NOTIFY_WEBHOOK_URL'
    | 'NOTIFY_WEBHOOK_SECRET'
    | 'NOTIFY_ORDERS_WEBHOOK_URL'
    | 'NOTIFY_ORDERS_WEBHOOK_SECRET'
    | 'NOTIFY_REMINDERS_WEBHOOK_URL'
    | 'NOTIFY_REMINDERS_WEBHOOK_SECRET'
    | 'NOTIFY_BATCHES_WEBHOOK_URL'
    | 'NOTIFY_BATCHES_WEBHOOK_SECRET'
    | 'NOTIFY_TIMEOUT_MS'
    | 'NOTIFY_RETRY_DELAYS_MS'
    | 'NOTIFY_RETRY_JITTER'
    | 'NOTIFY_MAX_ATTEMPTS'
    | 'NOTIFY_RELAY_INTERVAL_SECONDS'
    | 'WORKER_LEASE_MS'
  >;

export function createNotificationsModule(deps: { db: Db; redis: RedisClient; config: NotificationsModuleConfig; log: Logger; notifier?: Notifier }) {
  const { config } = deps;
  const log = deps.log.child({ module: 'notifications' });
  const queue = createModuleQueue(deps.redis, config, NOTIFICATIONS_QUEUE, {
    [DELIVER_JOB]: {
      maxAttempts: config.NOTIFY_MAX_ATTEMPTS,
      backoff: { kind: 'steps', delaysMs: config.NOTIFY_RETRY_DELAYS_MS, jitter: config.NOTIFY_RETRY_JITTER },
    },
    [RELAY_JOB]: PERIODIC_JOB_OPTIONS,
  });
  const notifier = deps.notifier ?? configuredNotifier(config, log);
  log.info({ notifier: notifier.name }, 'notification delivery');
  const repo = createNotificationsRepository(deps.db);
  const deliveries = createDeliveries(deps.db);
  const relay = createNotificationsRelay({
    repo,
    deliveries,
    queue,
    log,
    everyMs: config.NOTIFY_RELAY_INTERVAL_SECONDS * 1_000,
    sendingStaleSeconds: Math.ceil((2 * config.WORKER_LEASE_MS) / 1_000),
  });

  const dispatch: NotificationDispatch = async (ids, options) => {
    if (ids.length === 0) return;
    // The rows' kinds set their jobs' priority (notification-priority.ts): the
    // caller's, or one read by primary key, after the commit like the schedule.
    const kinds = async () => (options?.kind ? new Map(ids.map((id) => [id, options.kind as string])) : repo.kindsOf(ids));
    // A fresh delivery is not best effort: the relay schedules `nx` and would
    // find the row's old (dead) job and give the row up. It throws, so the
    // caller's job runs again and dispatches afresh.
    if (options?.fresh || options?.revive) {
      await scheduleDeliveries(queue, ids, options.fresh ? 'replace' : 'revive', await kinds());
      return;
    }
    const send = async () => scheduleDeliveries(queue, ids, 'nx', await kinds());
    await afterCommit(send, 'schedule deliveries', log, { ids }, 'the relay pass will pick them up');
  };

  const module: ServiceModule & { dispatch: NotificationDispatch; relay: typeof relay } = {
    name: 'notifications',
    ...httpOf(notificationsRoutes(repo)),
    queue,
    handlers: notificationsJobHandlers({
      deliveries,
      sender: notifier,
      queue,
      log,
      callTimeoutMs: config.NOTIFY_TIMEOUT_MS,
      sendingStaleMs: config.NOTIFY_TIMEOUT_MS + SENDING_MARGIN_MS,
    }),
    periodic: [relay.job],
    concurrency: config.DELIVERY_CONCURRENCY,
    // Only for delivery jobs: the relay's periodic job has no row.
    redrives: {
      record: (jobIds) => deliveries.requestRedrive(rowsOf(jobIds), true),
      undo: (jobIds) => deliveries.requestRedrive(rowsOf(jobIds), false),
    },
    dispatch,
    relay,
  };
  return module;
}

const rowsOf = (jobIds: readonly string[]) => jobIds.map(notificationIdOf).filter((id): id is string => id !== null);

/** The notifier the configuration asks for: each kind to its own endpoint, the others to NOTIFY_WEBHOOK_URL, or to the log. */
function configuredNotifier(c: NotificationsModuleConfig, log: Logger): Notifier {
  const webhook = (url: string | undefined, keys: readonly Buffer[] | undefined) => {
    if (!url) return undefined;
    if (!keys)
      log.warn({ url: new URL(url).origin }, 'webhook calls to this endpoint are not signed: set its secret (docs/api/notifications.md, "Signed webhooks")');
    const endpoint: WebhookEndpoint = { url, ...(keys && { keys }) };
    return createWebhookNotifier(endpoint, c.NOTIFY_TIMEOUT_MS);
  };
  // A timer's firing is the timers module's to deliver, on its own queue.
  const byKind: Record<Exclude<NotificationKind, 'TIMER'>, Notifier | undefined> = {
    ORDER_CANCELLED: webhook(c.NOTIFY_ORDERS_WEBHOOK_URL, c.NOTIFY_ORDERS_WEBHOOK_SECRET),
    ORDER_PAYMENT_REMINDER: webhook(c.NOTIFY_ORDERS_WEBHOOK_URL, c.NOTIFY_ORDERS_WEBHOOK_SECRET),
    APPOINTMENT_REMINDER: webhook(c.NOTIFY_REMINDERS_WEBHOOK_URL, c.NOTIFY_REMINDERS_WEBHOOK_SECRET),
    BATCH_DISPATCHED: webhook(c.NOTIFY_BATCHES_WEBHOOK_URL, c.NOTIFY_BATCHES_WEBHOOK_SECRET),
  };
  const fallback = webhook(c.NOTIFY_WEBHOOK_URL, c.NOTIFY_WEBHOOK_SECRET) ?? createLoggingNotifier(log);
  return Object.values(byKind).some(Boolean) ? createRoutingNotifier(byKind, fallback) : fallback;
}
