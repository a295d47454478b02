// An appointment as the statements answer it, the slot a reminder is for,
// and the SQL spelling of the reminder's key over an appointment row `a`.
import { Prisma } from '../../../generated/prisma/client.js';
import { type NotificationStatus, dedupeKey, dedupeKeySql } from '../../../core/delivery/index.js';

export type AppointmentRow = {
  id: string;
  customerId: string;
  contact: string;
  channel: 'SMS' | 'EMAIL';
  status: 'BOOKED' | 'CANCELLED';
  startsAt: Date;
  remindBeforeSeconds: number;
  remindAt: Date;
  /** The IANA zone quiet hours are read in; null: the configured default (booked before zones were kept). */
  timeZone: string | null;
  createdAt: Date;
  updatedAt: Date;
  cancelledAt: Date | null;
};

export const COLUMNS = Prisma.sql`id, customer_id AS "customerId", contact, channel::text AS channel, status::text AS status,
  starts_at AS "startsAt", remind_before_seconds AS "remindBeforeSeconds", remind_at AS "remindAt", time_zone AS "timeZone",
  created_at AS "createdAt", updated_at AS "updatedAt", cancelled_at AS "cancelledAt"`;

/** The dedupe key of the reminder of the slot appointment `a` holds now. */
export const HELD_SLOT_KEY = dedupeKeySql.appointmentReminder(Prisma.sql`a.id`, Prisma.sql`a.starts_at`);

/** A slot a reminder job was scheduled for: the appointment and the start it then had (ms). */
export type ReminderSlot = { readonly appointmentId: string; readonly startsAtMs: number };
/** The dedupe key of a slot's reminder (the id as the database writes it). */
export const slotKey = (s: ReminderSlot): string => dedupeKey.appointmentReminder(s.appointmentId.toLowerCase(), s.startsAtMs);

/** What reminderStates finds of a slot. */
export type ReminderState = {
  reminder: { id: string; status: NotificationStatus; live: boolean } | null;
  appointment: { id: string; status: 'BOOKED' | 'CANCELLED'; startsAt: Date; remindAt: Date; sameSlot: boolean; msToRemind: number } | null;
};
