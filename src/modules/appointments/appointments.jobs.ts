// The reminder jobs of slots and leads, handled in batches: one statement
// writes the reminder of every slot and lead of the batch still held and due
// (appointments.reminders.ts remindMany). Idempotent: a second delivery writes
// nothing. (The periodic reconciliation pass is in appointments.reconcile.ts.)
import { z } from 'zod';
import type { Logger } from '../../core/logger.js';
import { NonRetryableError, type AnyJobHandler, type BatchOutcome } from '../../queue/index.js';
import type { ReminderSlot } from './appointments.repository.js';
import { REMIND_JOB, type AppointmentsService, appointmentIdOfRemindJob } from './appointments.service.js';

// Redis fired the job by its clock; the database's may be behind: come back when
// the database says the remind time comes, but never in a tighter loop than this.
const NOT_DUE_RETRY_MS = 20;
/** Reminder jobs written by one statement at most. */
export const REMIND_BATCH_MAX = 500;

// The slot's start (ms since epoch) and its lead (s; none: the key lead); the appointment is the job id's.
const remindPayload = z.object({ startsAt: z.int(), lead: z.int().optional() });

export function appointmentsJobHandlers(service: AppointmentsService, log: Logger): Record<string, AnyJobHandler> {
  return {
    [REMIND_JOB]: {
      maxBatch: REMIND_BATCH_MAX,
      async batch(jobs) {
        const slots = jobs.map((job): ReminderSlot | null => {
          const p = remindPayload.safeParse(job.payload);
          const appointmentId = appointmentIdOfRemindJob(job.id);
          return p.success && appointmentId
            ? { appointmentId: appointmentId.toLowerCase(), startsAtMs: p.data.startsAt, leadSeconds: p.data.lead ?? null }
            : null;
        });
        const valid = slots.filter((s): s is ReminderSlot => s !== null);
        const outcomes = await service.remindMany(valid);
        const of = new Map(valid.map((s, i) => [s, outcomes[i]!]));
        return jobs.map((job, i): BatchOutcome => {
          const slot = slots[i];
          if (!slot) return { error: new NonRetryableError(`job ${job.id} names no appointment slot`) };
          const r = of.get(slot)!;
          if (!r.ok) return { error: r.error };
          if (r.value.kind === 'not_due') return { retryInMs: Math.max(r.value.inMs, NOT_DUE_RETRY_MS) };
          if (r.value.kind === 'written')
            log.info({ jobId: job.id, startsAt: new Date(slot.startsAtMs).toISOString(), lead: slot.leadSeconds }, 'appointment reminder written');
          return undefined;
        });
      },
    },
  };
}
