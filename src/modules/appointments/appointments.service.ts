// The appointments domain: book (idempotent), reschedule and cancel; the
// reminder write behind them is appointments.reminders.ts. PostgreSQL decides; the queue is told after the
// commit, best effort, and the reconciliation pass repairs what it missed.
// The API's functions take the caller's client first: another client's
// appointment is not found, as an unknown one, and nothing of it changes.
import { randomUUID } from 'node:crypto';
import type { CountryCode } from 'libphonenumber-js';
import { AppError } from '../../core/errors.js';
import { gatherSchedules } from '../../core/module-queue.js';
import { createIdempotently, gatherCreates } from '../../core/idempotent-create.js';
import type { Logger } from '../../core/logger.js';
import type { DistinctLimit, RateLimit } from '../../core/rate-limit.js';
import type { NotificationDispatch } from '../../core/delivery/index.js';
import { afterCommit } from '../../core/redis-call.js';
import type { Queue } from '../../queue/index.js';
import { type AppointmentRow, type AppointmentsRepository, type NewAppointment, slotLead } from './appointments.repository.js';
import type { BookAppointmentInput, RescheduleAppointmentInput } from './appointments.schemas.js';
import { checkedContact } from '../../core/contact.js';
import type { QuietHours } from './quiet-hours.js';
import { type PlannedFrom, leadsOf, planLeads } from './lead-plan.js';
import { reminderJobs, remindJobId } from './appointments.job-ids.js';
import { type RemindResult, createReminderWriter } from './appointments.reminders.js';
import { createContactLimits } from './contact-limits.js';

export { REMIND_JOB, appointmentIdOfRemindJob, remindJobId, remindPayload } from './appointments.job-ids.js';
/** Bookings sharing one INSERT and one schedule call at most. */
const GATHER_MAX = 100;
/** Plans of one move at most: each lost to a change committed since its read is planned again from that change. */
const MOVE_TRIES = 8;
/**
 * How far ahead a slot may be: a booking front end plans months, not
 * centuries, and a reminder's job must have a due time the queue takes (a
 * start in the year 9999 was booked, then its reminder failed to schedule on
 * every reconciliation pass).
 */
export const MAX_AHEAD_YEARS = 5;
const MAX_AHEAD_MS = MAX_AHEAD_YEARS * 366 * 86_400_000;

/** A new start must be ahead, within MAX_AHEAD_YEARS; a replayed booking is answered as it was, whenever the replay comes. */
function mustBeFuture(startsAt: Date | undefined): void {
  if (!startsAt) return;
  if (startsAt.getTime() <= Date.now()) throw new AppError('STARTS_AT_IN_PAST', 422, 'startsAt must be in the future');
  if (startsAt.getTime() > Date.now() + MAX_AHEAD_MS) throw new AppError('STARTS_AT_TOO_FAR', 422, `startsAt must be within ${MAX_AHEAD_YEARS} years from now`);
}

export function createAppointmentsService(d: {
  repo: AppointmentsRepository;
  queue: Queue;
  dispatch: NotificationDispatch;
  log: Logger;
  defaultLeadSeconds: number;
  /** The zone of appointments booked without one (APPOINTMENT_DEFAULT_TIME_ZONE). */
  defaultTimeZone: string;
  /** REMINDER_QUIET_HOURS with its shift; none: no quiet hours. */
  quietHours?: QuietHours | null | undefined;
  /** Reminders booked or moved per contact (REMINDERS_PER_CONTACT_PER_HOUR). */
  perContact: RateLimit;
  /** Distinct contacts per client in a sliding hour (CLIENT_CONTACTS_PER_HOUR); none: no such limit. */
  clientContacts?: DistinctLimit | undefined;
  /** Region of SMS contacts given without a country code (PHONE_DEFAULT_REGION); none: international only. */
  phoneRegion?: CountryCode | undefined;
}) {
  const { repo, queue, log } = d;
  const mayRemind = createContactLimits(d);
  const remindMany = createReminderWriter(d);
  // Bookings arriving in one event-loop turn share one INSERT and one schedule call.
  const inserts = gatherCreates((rows: readonly NewAppointment[]) => repo.insertMany(rows), GATHER_MAX);
  const bookingSchedules = gatherSchedules(queue, GATHER_MAX);
  /** When the reminders of `leads` at `startsAt` are planned, at this moment, from `was` (a change): lead-plan.ts. */
  const planOf = (startsAt: Date, leads: readonly number[], timeZone: string | null, was?: PlannedFrom) =>
    planLeads(startsAt, leads, timeZone ?? d.defaultTimeZone, d.quietHours ?? null, Date.now(), was);

  /**
   * Upsert: the pending reminder job of each lead planned follows the
   * appointment's current slot; `nx` (a booking, gathered with the others of
   * its turn): each created unless one exists. The job of a lead dropped is
   * left to find its lead gone (cancelling it could race a change that
   * planned the lead again, and lose its job until the reconciliation pass).
   */
  async function scheduleReminders(a: AppointmentRow, mode: 'upsert' | 'nx' = 'upsert') {
    const jobs = reminderJobs(a, mode);
    await afterCommit(
      () => Promise.all(jobs.map((job) => (mode === 'nx' ? bookingSchedules.submit(job) : queue.schedule(job)))),
      'schedule reminder',
      log,
      { appointmentId: a.id },
      'the reconciliation pass will create the job',
    );
  }

  /** Client `client`'s appointment: another client's is 404 exactly as an unknown id. */
  async function mustFind(client: string, id: string): Promise<AppointmentRow> {
    const a = await repo.find(client, id);
    if (!a) throw new AppError('APPOINTMENT_NOT_FOUND', 404, `appointment ${id} does not exist`);
    return a;
  }

  return {
    async book(client: string, input: BookAppointmentInput, idempotencyKey: string | null): Promise<{ appointment: AppointmentRow; replayed: boolean }> {
      const r = await createIdempotently<AppointmentRow>({
        key: idempotencyKey,
        body: input,
        find: (key) => repo.findByIdempotencyKey(client, key),
        insert: async (key, hash) => {
          mustBeFuture(input.startsAt);
          // Checked here, as the start is: a replay is answered as it was.
          const contact = checkedContact(input.channel, input.contact, d.phoneRegion);
          await mayRemind(client, input.channel, contact);
          const timeZone = input.timeZone ?? d.defaultTimeZone;
          const plan = planOf(input.startsAt, leadsOf(input.remindBeforeSeconds ?? d.defaultLeadSeconds), timeZone);
          return inserts.submit({
            id: randomUUID(),
            client,
            customerId: input.customerId,
            contact,
            channel: input.channel === 'sms' ? 'SMS' : 'EMAIL',
            startsAt: input.startsAt,
            timeZone,
            remindBeforeSeconds: plan.remindBeforeSeconds,
            remindAt: plan.remindAt,
            leads: plan.leads,
            idempotencyKey: key,
            requestHash: hash,
          });
        },
        // A repeat may follow a first request whose schedule missed Redis: scheduling again (only if absent) is harmless.
        onReplay: async (a) => {
          if (a.status === 'BOOKED') await scheduleReminders(a, 'nx');
        },
      });
      if (!r.replayed) await scheduleReminders(r.row, 'nx');
      return { appointment: r.row, replayed: r.replayed };
    },

    get: mustFind,

    /** The zone an appointment's quiet hours are read in. */
    timeZoneOf: (a: Pick<AppointmentRow, 'timeZone'>) => a.timeZone ?? d.defaultTimeZone,

    /**
     * The new slot, leads or zone, their remind times planned from the
     * booking as read and written only if the booking is still so (a
     * concurrent move committed since: planned again from it, as the
     * database's own arithmetic would have been).
     */
    async reschedule(client: string, id: string, input: RescheduleAppointmentInput): Promise<AppointmentRow> {
      mustBeFuture(input.startsAt);
      let current = await mustFind(client, id);
      if (current.status === 'BOOKED') await mayRemind(client, current.channel === 'SMS' ? 'sms' : 'email', current.contact);
      for (let tries = 1; current.status === 'BOOKED'; tries++) {
        const startsAt = input.startsAt ?? current.startsAt;
        const timeZone = input.timeZone ?? current.timeZone;
        const p = planOf(startsAt, input.remindBeforeSeconds === undefined ? current.leads : leadsOf(input.remindBeforeSeconds), timeZone, current);
        const plan = { was: current, timeZone, remindAt: p.remindAt, leads: p.leads, keyLead: p.keyLead };
        const row = await repo.reschedule(client, id, input.startsAt ?? null, p.remindBeforeSeconds, plan);
        if (row) {
          await scheduleReminders(row);
          return row;
        }
        // Cancelled since, deleted by retention (404 then), or changed since it was read.
        current = await mustFind(client, id);
        if (tries >= MOVE_TRIES && current.status === 'BOOKED')
          throw new AppError('APPOINTMENT_BUSY', 409, 'the appointment kept changing while this change was planned; try again');
      }
      throw new AppError('APPOINTMENT_CANCELLED', 409, 'a cancelled appointment cannot be rescheduled');
    },

    async cancel(client: string, id: string): Promise<AppointmentRow> {
      const row = await repo.cancel(client, id);
      if (!row) return mustFind(client, id); // already cancelled: same answer; another client's: 404, its job left alone
      // Harmless if it fails: the handlers find the appointment cancelled and write nothing.
      const ids = [remindJobId(id), ...row.leads.map((lead) => slotLead(row, lead)).flatMap((l) => (l === null ? [] : [remindJobId(id, l)]))];
      await afterCommit(
        () => Promise.all(ids.map((j) => queue.cancel(j))),
        'cancel reminder',
        log,
        { appointmentId: id },
        'its handler will find the appointment cancelled',
      );
      return row;
    },

    reminders: (client: string, id: string) => repo.listReminders(client, id),

    /** The reminder job of one slot and lead (null: the key lead; remindMany of one). */
    async remind(appointmentId: string, startsAtMs: number, leadSeconds: number | null = null): Promise<RemindResult> {
      const [r] = await remindMany([{ appointmentId, startsAtMs, leadSeconds }]);
      if (!r!.ok) throw r!.error;
      return r!.value;
    },

    remindMany,
  };
}

export type AppointmentsService = ReturnType<typeof createAppointmentsService>;
