// Jobs of the appointments queue: the reminder of one slot and the
// periodic reconciliation pass. Both are idempotent.
import { z } from 'zod';
import type { Logger } from '../../core/logger.js';
import { NonRetryableError } from '../../queue/errors.js';
import type { PeriodicJob } from '../../queue/periodic.js';
import type { JobHandler } from '../../queue/types.js';
import { REMIND_JOB, type AppointmentsService } from './appointments.service.js';

export const RECONCILE_JOB = 'appointments.reconcile';
export const RECONCILE_JOB_ID = 'appointments:reconcile';

// Redis fired the job by its clock; the database may be a few ms behind: come
// back at the remind time, but never in a tighter loop than this.
const NOT_DUE_RETRY_MS = 20;

const remindPayload = z.object({ appointmentId: z.uuid(), startsAt: z.int() });

/** The safety net: re-creates reminder jobs Redis lost and sends overdue reminders, every interval. */
export function appointmentsReconcileJob(service: AppointmentsService, everyMs: number): PeriodicJob {
  return { id: RECONCILE_JOB_ID, type: RECONCILE_JOB, schedule: { everyMs }, run: () => service.reconcile(2 * everyMs) };
}

export function appointmentsJobHandlers(service: AppointmentsService, log: Logger): Record<string, JobHandler> {
  return {
    [REMIND_JOB]: async (job) => {
      const p = remindPayload.safeParse(job.payload);
      if (!p.success) throw new NonRetryableError(`bad payload for ${job.id}`);
      const r = await service.remind(p.data.appointmentId, p.data.startsAt);
      if (r.kind === 'not_due') return { retryAt: Math.max(r.remindAt.getTime(), Date.now() + NOT_DUE_RETRY_MS) };
      if (r.kind === 'written') log.info({ jobId: job.id, startsAt: new Date(p.data.startsAt).toISOString() }, 'appointment reminder written');
    },
  };
}
