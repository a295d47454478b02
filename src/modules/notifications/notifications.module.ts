// Wires notification delivery: its queue, the notifier, the relay, the route,
// and the dispatch port the other domains call after their commits.
import type { RedisClient } from '../../core/redis.js';
import type { Config } from '../../config.js';
import type { Db } from '../../core/db.js';
import { httpOf } from '../../core/http/route.js';
import type { Logger } from '../../core/logger.js';
import type { ServiceModule } from '../../core/module.js';
import type { NotificationDispatch } from '../../core/outbox.js';
import { withTimeout } from '../../core/timeout.js';
import { createModuleQueue } from '../../core/module-queue.js';
import { DELIVER_JOB, RELAY_JOB, notificationsJobHandlers, notificationsRelayJob, scheduleDeliveries } from './notifications.jobs.js';
import { createNotificationsRepository } from './notifications.repository.js';
import { notificationsRoutes } from './notifications.routes.js';
import { type Notifier, createLoggingNotifier, createWebhookNotifier } from './notifier.js';

export const NOTIFICATIONS_QUEUE = 'notifications';

export type NotificationsModuleConfig = Pick<
  Config,
  | 'QUEUE_PREFIX'
  | 'QUEUE_SHARDS'
  | 'QUEUE_MAX_PAYLOAD_BYTES'
  | 'NOTIFY_WEBHOOK_URL'
  | 'NOTIFY_TIMEOUT_MS'
  | 'NOTIFY_RETRY_DELAYS_MS'
  | 'NOTIFY_RETRY_JITTER'
  | 'NOTIFY_MAX_ATTEMPTS'
  | 'NOTIFY_RELAY_INTERVAL_SECONDS'
>;

export function createNotificationsModule(deps: { db: Db; redis: RedisClient; config: NotificationsModuleConfig; log: Logger; notifier?: Notifier }) {
  const { config } = deps;
  const log = deps.log.child({ module: 'notifications' });
  const queue = createModuleQueue(deps.redis, config, NOTIFICATIONS_QUEUE, {
    [DELIVER_JOB]: {
      maxAttempts: config.NOTIFY_MAX_ATTEMPTS,
      backoff: { kind: 'steps', delaysMs: config.NOTIFY_RETRY_DELAYS_MS, jitter: config.NOTIFY_RETRY_JITTER },
    },
    [RELAY_JOB]: { maxAttempts: 1_000 },
  });
  const notifier =
    deps.notifier ??
    (config.NOTIFY_WEBHOOK_URL ? createWebhookNotifier(config.NOTIFY_WEBHOOK_URL, config.NOTIFY_TIMEOUT_MS) : createLoggingNotifier(log));
  log.info({ notifier: notifier.name }, 'notification delivery');
  const repo = createNotificationsRepository(deps.db);
  const relayIntervalMs = config.NOTIFY_RELAY_INTERVAL_SECONDS * 1_000;

  const dispatch: NotificationDispatch = async (ids) => {
    if (ids.length === 0) return;
    try {
      await withTimeout(scheduleDeliveries(queue, ids), 2_000, 'schedule deliveries');
    } catch (err) {
      log.warn({ err, ids }, 'deliveries not scheduled; the relay pass will pick them up');
    }
  };

  const module: ServiceModule & { dispatch: NotificationDispatch } = {
    name: 'notifications',
    ...httpOf(notificationsRoutes(repo)),
    queue,
    handlers: notificationsJobHandlers({ repo, notifier, queue, log }),
    periodic: [notificationsRelayJob({ repo, queue, log, everyMs: relayIntervalMs })],
    dispatch,
  };
  return module;
}
