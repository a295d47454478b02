// Wires the appointments slice: queue, repository, service, routes and job handlers.
import type { RedisClient } from '../../core/redis.js';
import type { Config } from '../../config.js';
import type { Db } from '../../core/db.js';
import { httpOf } from '../../core/http/route.js';
import type { Logger } from '../../core/logger.js';
import type { ServiceModule } from '../../core/module.js';
import type { NotificationDispatch } from '../../core/outbox.js';
import { createModuleQueue } from '../../core/module-queue.js';
import { RECONCILE_JOB, appointmentsJobHandlers, appointmentsReconcileJob } from './appointments.jobs.js';
import { createAppointmentsRepository } from './appointments.repository.js';
import { appointmentsRoutes } from './appointments.routes.js';
import { REMIND_JOB, createAppointmentsService } from './appointments.service.js';

export const APPOINTMENTS_QUEUE = 'appointments';

export type AppointmentsModuleConfig = Pick<
  Config,
  | 'QUEUE_PREFIX'
  | 'QUEUE_SHARDS'
  | 'QUEUE_MAX_PAYLOAD_BYTES'
  | 'REMINDER_LEAD_SECONDS'
  | 'APPOINTMENT_RECONCILE_INTERVAL_SECONDS'
  | 'APPOINTMENT_RECONCILE_GRACE_SECONDS'
>;

export function createAppointmentsModule(deps: {
  db: Db;
  redis: RedisClient;
  config: AppointmentsModuleConfig;
  log: Logger;
  dispatch: NotificationDispatch;
}) {
  const { config } = deps;
  const log = deps.log.child({ module: 'appointments' });
  const queue = createModuleQueue(deps.redis, config, APPOINTMENTS_QUEUE, {
    [REMIND_JOB]: { maxAttempts: 20, backoff: { kind: 'exponential', baseMs: 500, maxMs: 5 * 60_000, jitter: 0.2 } },
    [RECONCILE_JOB]: { maxAttempts: 1_000 },
  });
  const service = createAppointmentsService({
    repo: createAppointmentsRepository(deps.db),
    queue,
    dispatch: deps.dispatch,
    log,
    defaultLeadSeconds: config.REMINDER_LEAD_SECONDS,
    reconcileGraceSeconds: config.APPOINTMENT_RECONCILE_GRACE_SECONDS,
  });
  const everyMs = config.APPOINTMENT_RECONCILE_INTERVAL_SECONDS * 1_000;
  const module: ServiceModule & { service: typeof service } = {
    name: 'appointments',
    ...httpOf(appointmentsRoutes(service)),
    queue,
    handlers: appointmentsJobHandlers(service, log),
    periodic: [appointmentsReconcileJob(service, everyMs)],
    service,
  };
  return module;
}
