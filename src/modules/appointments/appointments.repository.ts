// The appointments domain's statements on one database. Each lives in sql/,
// one file per transition with a header (what it does, why one statement, its
// guard, its lock order, what it returns); every change is judged by the
// database clock, and the reminder is written only by the statement that
// checks the appointment still holds the slot it was scheduled for. What the
// API calls takes the caller's client first and sees only that client's rows;
// what the jobs call goes by id.
import type { Db } from '../../core/db.js';
import { purgeOf } from '../../core/retention.js';
import { type ReminderSlot, slotKey } from './sql/appointment-row.js';
import { type MovePlan, cancelAppointment, rescheduleAppointment } from './sql/change-slot.js';
import { type NewAppointment, insertAppointments } from './sql/insert-appointments.js';
import { PURGE_BOOKED, PURGE_CANCELLED } from './sql/purge.js';
import { findAppointment, findAppointmentByIdempotencyKey, findReminder, listReminders, reminderStates } from './sql/reads.js';
import { type UnremindedWindow, listUnreminded } from './sql/unreminded.js';
import { writeReminders } from './sql/write-reminders.js';

export type { AppointmentRow, ReminderSlot, ReminderState } from './sql/appointment-row.js';
export { slotKey, slotLead } from './sql/appointment-row.js';
export type { NewAppointment } from './sql/insert-appointments.js';
export type { MovePlan, SlotPlan } from './sql/change-slot.js';
export type { UnmarkedLead } from './sql/unreminded.js';

export function createAppointmentsRepository(db: Db) {
  return {
    insert: async (a: NewAppointment) => (await insertAppointments(db, [a]))[0] ?? null,
    insertMany: (rows: readonly NewAppointment[]) => insertAppointments(db, rows),
    find: (client: string, id: string) => findAppointment(db, client, id),
    findByIdempotencyKey: (client: string, key: string) => findAppointmentByIdempotencyKey(db, client, key),
    reschedule: (client: string, id: string, startsAt: Date | null, lead: number | null, plan?: MovePlan) =>
      rescheduleAppointment(db, client, id, startsAt, lead, plan),
    cancel: (client: string, id: string) => cancelAppointment(db, client, id),
    /** writeReminders of one slot and lead (null: the key lead): the reminder written or taken back, or null. */
    writeReminder: async (id: string, startsAtMs: number, leadSeconds: number | null = null) => {
      const slot = { appointmentId: id, startsAtMs, leadSeconds };
      return (await writeReminders(db, [slot])).get(slotKey(slot)) ?? null;
    },
    writeReminders: (slots: readonly ReminderSlot[]) => writeReminders(db, slots),
    reminderStates: (slots: readonly ReminderSlot[]) => reminderStates(db, slots),
    findReminder: (id: string, startsAtMs: number, leadSeconds: number | null = null) => findReminder(db, id, startsAtMs, leadSeconds),
    listUnreminded: (w: UnremindedWindow, after: { remindAt: Date; id: string } | null, limit: number) => listUnreminded(db, w, after, limit),
    /** Retention, one kind per status (sql/purge.ts). */
    retention: [purgeOf(db, 'appointments BOOKED', PURGE_BOOKED), purgeOf(db, 'appointments CANCELLED', PURGE_CANCELLED)] as const,
    listReminders: (client: string, id: string) => listReminders(db, client, id),
  };
}

export type AppointmentsRepository = ReturnType<typeof createAppointmentsRepository>;
