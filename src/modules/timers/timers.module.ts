// Wires the timers: their queue (one job type per target kind), the senders
// (webhook always; AMQP and NATS when their broker is configured), the
// service and routes, the relay, and the redrive record of dead deliveries.
import type { Config } from '../../config.js';
import type { Db } from '../../core/db.js';
import { createDeliveries, deliveryRowOf } from '../../core/delivery/index.js';
import { httpOf } from '../../core/http/route.js';
import type { Logger } from '../../core/logger.js';
import type { Background, ServiceModule } from '../../core/module.js';
import { PERIODIC_JOB_OPTIONS, type QueueConfig, createModuleQueue } from '../../core/module-queue.js';
import { afterCommit } from '../../core/redis-call.js';
import { type RetentionConfig, createRetentionJob, purgeOf, retentionJobType } from '../../core/retention.js';
import { PURGE_TIMERS } from './sql/purge.js';
import type { RedisClient } from '../../core/redis.js';
import type { JobTypeOptions } from '../../queue/index.js';
import { createAmqpSender } from './targets/amqp.js';
import { createNatsSender } from './targets/nats.js';
import { createWebhookSender } from './targets/webhook.js';
import { TIMER_JOB, type TargetSenders, firingLimitKey, scheduleFirings, timerSender, timersJobHandlers } from './timers.jobs.js';
import { TIMERS_RELAY_JOB, createTimersRelay } from './timers.reconcile.js';
import { timersRoutes } from './timers.routes.js';
import { createTimersService } from './timers.service.js';

export const TIMERS_QUEUE = 'timers';
/** A firing SENDING longer than a call's timeout plus this has lost the delivery that claimed it. */
const SENDING_MARGIN_MS = 5_000;

export type TimersModuleConfig = QueueConfig &
  RetentionConfig &
  Pick<
    Config,
    | 'DELIVERY_CONCURRENCY'
    | 'TIMER_WEBHOOK_HOSTS'
    | 'TIMER_AMQP_EXCHANGES'
    | 'TIMER_NATS_SUBJECTS'
    | 'AMQP_URL'
    | 'NATS_URL'
    | 'NOTIFY_TIMEOUT_MS'
    | 'TIMER_WEBHOOK_RETRY_DELAYS_MS'
    | 'TIMER_AMQP_RETRY_DELAYS_MS'
    | 'TIMER_NATS_RETRY_DELAYS_MS'
    | 'NOTIFY_RETRY_JITTER'
    | 'TIMER_MAX_ATTEMPTS'
    | 'TIMER_RELAY_INTERVAL_SECONDS'
    | 'WORKER_LEASE_MS'
  >;

export function createTimersModule(deps: {
  db: Db;
  redis: RedisClient;
  config: TimersModuleConfig;
  log: Logger;
  /** The client's webhook signing secrets, newest first (core/client-webhook-secrets.ts). */
  keysFor: (client: string) => Promise<readonly Buffer[]>;
}) {
  const { config: c, db } = deps;
  const log = deps.log.child({ module: 'timers' });
  const steps = (delaysMs: readonly number[]): JobTypeOptions => ({
    maxAttempts: c.TIMER_MAX_ATTEMPTS,
    backoff: { kind: 'steps', delaysMs, jitter: c.NOTIFY_RETRY_JITTER },
    limitKey: firingLimitKey,
  });
  const queue = createModuleQueue(deps.redis, c, TIMERS_QUEUE, {
    [TIMER_JOB.webhook]: steps(c.TIMER_WEBHOOK_RETRY_DELAYS_MS),
    [TIMER_JOB.amqp]: steps(c.TIMER_AMQP_RETRY_DELAYS_MS),
    [TIMER_JOB.nats]: steps(c.TIMER_NATS_RETRY_DELAYS_MS),
    [TIMERS_RELAY_JOB]: PERIODIC_JOB_OPTIONS,
    [retentionJobType(TIMERS_QUEUE)]: PERIODIC_JOB_OPTIONS,
  });
  const senders: TargetSenders = {
    webhook: createWebhookSender({ timeoutMs: c.NOTIFY_TIMEOUT_MS, keysFor: deps.keysFor }),
    amqp: c.AMQP_URL ? createAmqpSender({ url: c.AMQP_URL, timeoutMs: c.NOTIFY_TIMEOUT_MS, log }) : undefined,
    nats: c.NATS_URL ? createNatsSender({ url: c.NATS_URL, timeoutMs: c.NOTIFY_TIMEOUT_MS, log }) : undefined,
  };
  const deliveries = createDeliveries(db);
  const service = createTimersService({
    db,
    allow: c,
    defaultMaxAttempts: c.TIMER_MAX_ATTEMPTS,
    schedule: (jobs) =>
      jobs.length === 0
        ? Promise.resolve()
        : afterCommit(() => scheduleFirings(queue, jobs), 'schedule timer deliveries', log, { count: jobs.length }, 'the timers relay will pick them up').then(
            () => undefined,
          ),
  });
  const relay = createTimersRelay({
    db,
    deliveries,
    queue,
    log,
    everyMs: c.TIMER_RELAY_INTERVAL_SECONDS * 1_000,
    sendingStaleSeconds: Math.ceil((2 * c.WORKER_LEASE_MS) / 1_000),
  });
  // The brokers' connections close with the workers.
  const brokers: Background = {
    name: 'timers:brokers',
    start: async () => {},
    stop: async () => {
      await Promise.all([senders.webhook.close(), senders.amqp?.close(), senders.nats?.close()]);
    },
  };

  const module: ServiceModule & { service: typeof service; relay: typeof relay } = {
    name: 'timers',
    ...httpOf(timersRoutes(service)),
    queue,
    handlers: timersJobHandlers({
      deliveries,
      sender: timerSender(senders),
      queue,
      log,
      callTimeoutMs: c.NOTIFY_TIMEOUT_MS,
      sendingStaleMs: c.NOTIFY_TIMEOUT_MS + SENDING_MARGIN_MS,
    }),
    // Retention: timers untouched for RETENTION_DAYS, all their firings settled (sql/purge.ts).
    periodic: [relay.job, createRetentionJob(TIMERS_QUEUE, [purgeOf(db, 'timers', PURGE_TIMERS)], c, log)],
    background: [brokers],
    concurrency: c.DELIVERY_CONCURRENCY,
    redrives: {
      record: (jobIds) => deliveries.requestRedrive(rowsOf(jobIds), true),
      undo: (jobIds) => deliveries.requestRedrive(rowsOf(jobIds), false),
    },
    service,
    relay,
  };
  return module;
}

const rowsOf = (jobIds: readonly string[]) => jobIds.map(deliveryRowOf).filter((id): id is string => id !== null);
