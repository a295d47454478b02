// The appointments domain: book (idempotent), reschedule and cancel, and the
// reminder work behind them. PostgreSQL decides; the queue is told after the
// commit, best effort, and the reconciliation pass repairs what it missed.
import { randomUUID } from 'node:crypto';
import { isUniqueViolation } from '../../core/db-errors.js';
import { AppError } from '../../core/errors.js';
import { requestHash } from '../../core/http/idempotency-key.js';
import type { Logger } from '../../core/logger.js';
import type { NotificationDispatch } from '../../core/outbox.js';
import { withTimeout } from '../../core/timeout.js';
import type { Queue } from '../../queue/queue.js';
import type { AppointmentRow, AppointmentsRepository } from './appointments.repository.js';
import type { BookAppointmentInput, RescheduleAppointmentInput } from './appointments.schemas.js';

export const REMIND_JOB = 'appointment.remind';
export const remindJobId = (appointmentId: string) => `appointment:${appointmentId}:remind`;

const QUEUE_CALL_TIMEOUT_MS = 2_000;

export type RemindResult =
  | { kind: 'written' }
  | { kind: 'already_written' }
  | { kind: 'not_due'; remindAt: Date }
  | { kind: 'moved' }
  | { kind: 'not_booked' };

export function createAppointmentsService(d: {
  repo: AppointmentsRepository;
  queue: Queue;
  dispatch: NotificationDispatch;
  log: Logger;
  defaultLeadSeconds: number;
  reconcileGraceSeconds: number;
}) {
  const { repo, queue, log } = d;

  /** Upsert: the one pending reminder job of the appointment follows its current slot. */
  async function scheduleReminder(a: Pick<AppointmentRow, 'id' | 'remindAt' | 'startsAt'>, mode: 'upsert' | 'nx' = 'upsert') {
    try {
      await withTimeout(
        queue.schedule({
          id: remindJobId(a.id),
          type: REMIND_JOB,
          at: a.remindAt,
          payload: { appointmentId: a.id, startsAt: a.startsAt.getTime() },
          mode,
        }),
        QUEUE_CALL_TIMEOUT_MS,
        'schedule reminder',
      );
    } catch (err) {
      log.warn({ err, appointmentId: a.id }, 'reminder job not scheduled; the reconciliation pass will create it');
    }
  }

  async function mustFind(id: string): Promise<AppointmentRow> {
    const a = await repo.find(id);
    if (!a) throw new AppError('APPOINTMENT_NOT_FOUND', 404, `appointment ${id} does not exist`);
    return a;
  }

  async function replay(key: string, hash: string) {
    const existing = await repo.findByIdempotencyKey(key);
    if (!existing) return null;
    if (existing.requestHash !== hash) {
      throw new AppError('IDEMPOTENCY_KEY_REUSED', 422, 'this Idempotency-Key was used with a different request body');
    }
    if (existing.row.status === 'BOOKED') await scheduleReminder(existing.row, 'nx');
    return { appointment: existing.row, replayed: true };
  }

  /** The reminder job: write the reminder if the slot is still held and due, then hand it to delivery. */
  async function remind(appointmentId: string, startsAtMs: number): Promise<RemindResult> {
    const written = await repo.writeReminder(appointmentId, startsAtMs);
    if (written) {
      await d.dispatch([written]);
      return { kind: 'written' };
    }
    const existing = await repo.findReminder(appointmentId, startsAtMs);
    if (existing) {
      // A redelivery after a crash between the write and the dispatch.
      if (existing.status === 'PENDING') await d.dispatch([existing.id]);
      return { kind: 'already_written' };
    }
    const a = await repo.find(appointmentId);
    if (!a || a.status !== 'BOOKED') return { kind: 'not_booked' };
    if (a.startsAt.getTime() !== startsAtMs) {
      // This job carried an old slot (two reschedules raced their queue updates):
      // make the job follow the slot the database holds.
      await scheduleReminder(a);
      return { kind: 'moved' };
    }
    // Not due yet by the database clock (clock skew, or a job left at an older,
    // earlier remind time when its move did not reach Redis): come back then.
    return { kind: 'not_due', remindAt: a.remindAt };
  }

  return {
    async book(input: BookAppointmentInput, idempotencyKey: string | null): Promise<{ appointment: AppointmentRow; replayed: boolean }> {
      const hash = idempotencyKey ? requestHash(input) : '';
      if (idempotencyKey) {
        const r = await replay(idempotencyKey, hash);
        if (r) return r;
      }
      let row: AppointmentRow | null;
      try {
        row = await repo.insert({
          id: randomUUID(),
          customerId: input.customerId,
          contact: input.contact,
          channel: input.channel === 'sms' ? 'SMS' : 'EMAIL',
          startsAt: input.startsAt,
          remindBeforeSeconds: input.remindBeforeSeconds ?? d.defaultLeadSeconds,
          idempotencyKey,
          requestHash: idempotencyKey ? hash : null,
        });
      } catch (err) {
        if (idempotencyKey && isUniqueViolation(err)) {
          const r = await replay(idempotencyKey, hash);
          if (r) return r;
        }
        throw err;
      }
      if (!row) throw new Error('appointment insert returned no row');
      await scheduleReminder(row, 'nx');
      return { appointment: row, replayed: false };
    },

    get: mustFind,

    async reschedule(id: string, input: RescheduleAppointmentInput): Promise<AppointmentRow> {
      const row = await repo.reschedule(id, input.startsAt ?? null, input.remindBeforeSeconds ?? null);
      if (!row) {
        await mustFind(id);
        throw new AppError('APPOINTMENT_CANCELLED', 409, 'a cancelled appointment cannot be rescheduled');
      }
      await scheduleReminder(row);
      return row;
    },

    async cancel(id: string): Promise<AppointmentRow> {
      const row = await repo.cancel(id);
      if (!row) return mustFind(id); // already cancelled: same answer
      try {
        await withTimeout(queue.cancel(remindJobId(id)), QUEUE_CALL_TIMEOUT_MS, 'cancel reminder');
      } catch (err) {
        // Harmless: the handler finds the appointment cancelled and writes nothing.
        log.warn({ err, appointmentId: id }, 'reminder job not removed');
      }
      return row;
    },

    reminders: (id: string) => repo.listReminders(id),

    remind,

    /**
     * Safety net. Overdue reminders (past the grace, none written for the current
     * slot) are written right here, whatever became of their job; reminders due
     * within the next `horizonMs` get their job set to the current slot (upsert,
     * so a job left at an old slot is corrected). Later ones wait until they
     * enter that window, which keeps each pass small.
     */
    async reconcile(horizonMs: number): Promise<{ written: number; jobsSet: number }> {
      let written = 0;
      let jobsSet = 0;
      let cursor: { id: string; remindAt: Date } | null = null;
      for (;;) {
        const page: { id: string; remindAt: Date; startsAt: Date; overdue: boolean }[] = await repo.listUnreminded(
          d.reconcileGraceSeconds,
          horizonMs,
          cursor,
          1_000,
        );
        if (page.length === 0) break;
        for (const a of page.filter((x) => x.overdue)) {
          if ((await remind(a.id, a.startsAt.getTime())).kind === 'written') written++;
        }
        const upcoming = page.filter((x) => !x.overdue);
        if (upcoming.length) {
          await queue.scheduleMany(
            upcoming.map((a) => ({
              id: remindJobId(a.id),
              type: REMIND_JOB,
              at: a.remindAt,
              payload: { appointmentId: a.id, startsAt: a.startsAt.getTime() },
            })),
          );
          jobsSet += upcoming.length;
        }
        cursor = page[page.length - 1] ?? null;
      }
      if (written) log.warn({ written }, 'appointments reconciliation wrote overdue reminders');
      return { written, jobsSet };
    },
  };
}

export type AppointmentsService = ReturnType<typeof createAppointmentsService>;
