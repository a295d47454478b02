// Wires notification delivery: its queue, the notifier, the relay, the route,
// and the dispatch port the other domains call after their commits.
import type { RedisClient } from '../../core/redis.js';
import type { Config } from '../../config.js';
import type { Db } from '../../core/db.js';
import { httpOf } from '../../core/http/route.js';
import type { Logger } from '../../core/logger.js';
import type { ServiceModule } from '../../core/module.js';
import type { NotificationDispatch } from '../../core/outbox.js';
import { afterCommit } from '../../core/redis-call.js';
import { PERIODIC_JOB_OPTIONS, type QueueConfig, createModuleQueue } from '../../core/module-queue.js';
import { DELIVER_JOB, notificationsJobHandlers, scheduleDeliveries } from './notifications.jobs.js';
import { RELAY_JOB, createNotificationsRelay } from './notifications.reconcile.js';
import { createNotificationsRepository } from './notifications.repository.js';
import { notificationsRoutes } from './notifications.routes.js';
import { type Notifier, createLoggingNotifier, createWebhookNotifier } from './notifier.js';

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
    | 'NOTIFY_WEBHOOK_URL'
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
  const notifier =
    deps.notifier ?? (config.NOTIFY_WEBHOOK_URL ? createWebhookNotifier(config.NOTIFY_WEBHOOK_URL, config.NOTIFY_TIMEOUT_MS) : createLoggingNotifier(log));
  log.info({ notifier: notifier.name }, 'notification delivery');
  const repo = createNotificationsRepository(deps.db);
  const relay = createNotificationsRelay({
    repo,
    queue,
    log,
    everyMs: config.NOTIFY_RELAY_INTERVAL_SECONDS * 1_000,
    sendingStaleSeconds: Math.ceil((2 * config.WORKER_LEASE_MS) / 1_000),
  });

  const dispatch: NotificationDispatch = async (ids, options) => {
    if (ids.length === 0) return;
    // A fresh delivery is not best effort: the relay schedules `nx` and would
    // find the row's old (dead) job and give the row up. It throws, so the
    // caller's job runs again and dispatches afresh.
    if (options?.fresh) {
      await scheduleDeliveries(queue, ids, 'replace');
      return;
    }
    await afterCommit(() => scheduleDeliveries(queue, ids, 'nx'), 'schedule deliveries', log, { ids }, 'the relay pass will pick them up');
  };

  const module: ServiceModule & { dispatch: NotificationDispatch; relay: typeof relay } = {
    name: 'notifications',
    ...httpOf(notificationsRoutes(repo)),
    queue,
    handlers: notificationsJobHandlers({ repo, notifier, queue, log, sendingStaleMs: config.NOTIFY_TIMEOUT_MS + SENDING_MARGIN_MS }),
    periodic: [relay.job],
    dispatch,
    relay,
  };
  return module;
}
