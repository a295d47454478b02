// Wires the appointments slice: queue, repository, service, routes and job handlers.
import type { RedisClient } from '../../core/redis.js';
import type { Config } from '../../config.js';
import type { Db } from '../../core/db.js';
import { httpOf } from '../../core/http/route.js';
import { distinctLimit, rateLimit } from '../../core/rate-limit.js';
import type { Logger } from '../../core/logger.js';
import type { ServiceModule } from '../../core/module.js';
import type { NotificationDispatch } from '../../core/delivery/index.js';
import { DATABASE_JOB_OPTIONS, PERIODIC_JOB_OPTIONS, type QueueConfig, createModuleQueue } from '../../core/module-queue.js';
import { type RetentionConfig, createRetentionJob, retentionJobType } from '../../core/retention.js';
import { appointmentsJobHandlers } from './appointments.jobs.js';
import { RECONCILE_JOB, createAppointmentsReconcile } from './appointments.reconcile.js';
import { createAppointmentsRepository } from './appointments.repository.js';
import { appointmentsRoutes } from './appointments.routes.js';
import { REMIND_JOB, createAppointmentsService } from './appointments.service.js';
import { parseQuietHours } from './quiet-hours.js';

export const APPOINTMENTS_QUEUE = 'appointments';

export type AppointmentsModuleConfig = QueueConfig &
  RetentionConfig &
  Pick<
    Config,
    | 'REMINDER_LEAD_SECONDS'
    | 'APPOINTMENT_DEFAULT_TIME_ZONE'
    | 'REMINDER_QUIET_HOURS'
    | 'REMINDER_QUIET_HOURS_SHIFT'
    | 'APPOINTMENT_RECONCILE_INTERVAL_SECONDS'
    | 'APPOINTMENT_RECONCILE_GRACE_SECONDS'
    | 'APPOINTMENT_RECONCILE_AFTER_START_SECONDS'
    | 'REMINDERS_PER_CONTACT_PER_HOUR'
    | 'CLIENT_CONTACTS_PER_HOUR'
    | 'PHONE_DEFAULT_REGION'
  >;

export function createAppointmentsModule(deps: { db: Db; redis: RedisClient; config: AppointmentsModuleConfig; log: Logger; dispatch: NotificationDispatch }) {
  const { config } = deps;
  const log = deps.log.child({ module: 'appointments' });
  const queue = createModuleQueue(deps.redis, config, APPOINTMENTS_QUEUE, {
    [REMIND_JOB]: DATABASE_JOB_OPTIONS,
    [RECONCILE_JOB]: PERIODIC_JOB_OPTIONS,
    [retentionJobType(APPOINTMENTS_QUEUE)]: PERIODIC_JOB_OPTIONS,
  });
  const repo = createAppointmentsRepository(deps.db);
  const perHour = config.REMINDERS_PER_CONTACT_PER_HOUR;
  const service = createAppointmentsService({
    repo,
    queue,
    dispatch: deps.dispatch,
    log,
    defaultLeadSeconds: config.REMINDER_LEAD_SECONDS,
    defaultTimeZone: config.APPOINTMENT_DEFAULT_TIME_ZONE,
    // Checked by the configuration already: a window it let through parses.
    quietHours: config.REMINDER_QUIET_HOURS === undefined ? null : parseQuietHours(config.REMINDER_QUIET_HOURS, config.REMINDER_QUIET_HOURS_SHIFT),
    // Refused while Redis is away: it stands in front of a paid SMS channel, and what it admits then is sent.
    perContact: rateLimit(deps.redis, config.QUEUE_PREFIX, 'contact', perHour / 3_600, perHour, 'refuse'),
    clientContacts:
      config.CLIENT_CONTACTS_PER_HOUR > 0 ? distinctLimit(deps.redis, config.QUEUE_PREFIX, 'contacts', config.CLIENT_CONTACTS_PER_HOUR, 3_600_000) : undefined,
    phoneRegion: config.PHONE_DEFAULT_REGION,
  });
  const reconcile = createAppointmentsReconcile({
    repo,
    service,
    queue,
    log,
    graceSeconds: config.APPOINTMENT_RECONCILE_GRACE_SECONDS,
    afterStartSeconds: config.APPOINTMENT_RECONCILE_AFTER_START_SECONDS,
    everyMs: config.APPOINTMENT_RECONCILE_INTERVAL_SECONDS * 1_000,
  });
  const retention = createRetentionJob(APPOINTMENTS_QUEUE, repo.retention, config, log);
  const module: ServiceModule & { service: typeof service; reconcile: typeof reconcile } = {
    name: 'appointments',
    ...httpOf(appointmentsRoutes(service)),
    queue,
    handlers: appointmentsJobHandlers(service, log),
    periodic: [reconcile.job, retention],
    service,
    reconcile,
  };
  return module;
}
