// The reminder job of one slot: idempotent, a second delivery writes nothing.
// (The periodic reconciliation pass is in appointments.reconcile.ts.)
import { z } from 'zod';
import type { Logger } from '../../core/logger.js';
import { NonRetryableError, type JobHandler } from '../../queue/index.js';
import { REMIND_JOB, type AppointmentsService } from './appointments.service.js';

// Redis fired the job by its clock; the database's may be behind: come back when
// the database says the remind time comes, but never in a tighter loop than this.
const NOT_DUE_RETRY_MS = 20;

const remindPayload = z.object({ appointmentId: z.uuid(), startsAt: z.int() });

export function appointmentsJobHandlers(service: AppointmentsService, log: Logger): Record<string, JobHandler> {
  return {
    [REMIND_JOB]: async (job) => {
      const p = remindPayload.safeParse(job.payload);
      if (!p.success) throw new NonRetryableError(`bad payload for ${job.id}`);
      const r = await service.remind(p.data.appointmentId, p.data.startsAt);
      if (r.kind === 'not_due') return { retryInMs: Math.max(r.inMs, NOT_DUE_RETRY_MS) };
      if (r.kind === 'written') log.info({ jobId: job.id, startsAt: new Date(p.data.startsAt).toISOString() }, 'appointment reminder written');
    },
  };
}
