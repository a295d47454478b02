// An appointment as the statements answer it, the slot and lead a reminder is
// for, and the SQL spelling of its leads, their planned times and their
// reminders' keys over an appointment row `a`.
import { Prisma } from '../../../generated/prisma/client.js';
import { type NotificationStatus, dedupeKey, dedupeKeySql } from '../../../core/delivery/index.js';

export type AppointmentRow = {
  id: string;
  customerId: string;
  contact: string;
  channel: 'SMS' | 'EMAIL';
  status: 'BOOKED' | 'CANCELLED';
  startsAt: Date;
  /** The first (longest) lead. */
  remindBeforeSeconds: number;
  /** The earliest planned remind time among the leads whose reminder is not written yet (one lead: its remind time). */
  remindAt: Date;
  /** The IANA zone quiet hours are read in; null: the configured default (booked before zones were kept). */
  timeZone: string | null;
  createdAt: Date;
  updatedAt: Date;
  cancelledAt: Date | null;
  /** Every lead, longest first. */
  leads: number[];
  /** Each lead's planned remind time (as `leads`); null: skipped, its time had passed when it was set while another lead was ahead. */
  leadRemindAt: (Date | null)[];
  /** The lead whose reminder has the key and job id without a lead (the form of one-lead bookings). */
  keyLead: number;
  /**
   * Stored in the one-lead form (no list of leads: its one lead's reminder
   * is the slot's one reminder, under the key without a lead, whatever that
   * lead becomes). A booking that ever held a list keeps the list form.
   */
  oneLead: boolean;
  /**
   * The key lead as stored (null: the first lead). In the one-lead form, the
   * lead the reminder under the key without a lead was written for on the
   * current slot (null: none written yet): the lead that keeps that key if
   * the booking takes a list on this slot.
   */
  pinnedKeyLead: number | null;
};

/** The leads of `a`, longest first: one for bookings that never had more. */
export const leadsSql = (a: Prisma.Sql) => Prisma.sql`COALESCE(${a}.leads, ARRAY[${a}.remind_before_seconds])`;
/** Their planned times, as leadsSql. */
export const plansSql = (a: Prisma.Sql) => Prisma.sql`COALESCE(${a}.lead_remind_at, ARRAY[${a}.remind_at])`;
/** The lead whose reminder keeps the key without a lead: the one lead of the one-lead form, whatever lead its key was written for. */
export const keyLeadSql = (a: Prisma.Sql) =>
  Prisma.sql`(CASE WHEN ${a}.leads IS NULL THEN ${a}.remind_before_seconds ELSE COALESCE(${a}.key_lead, ${a}.remind_before_seconds) END)`;

export const COLUMNS = Prisma.sql`id, customer_id AS "customerId", contact, channel::text AS channel, status::text AS status,
  starts_at AS "startsAt", remind_before_seconds AS "remindBeforeSeconds", remind_at AS "remindAt", time_zone AS "timeZone",
  created_at AS "createdAt", updated_at AS "updatedAt", cancelled_at AS "cancelledAt",
  COALESCE(leads, ARRAY[remind_before_seconds]) AS leads, COALESCE(lead_remind_at, ARRAY[remind_at]) AS "leadRemindAt",
  ${keyLeadSql(Prisma.sql`appointments`)} AS "keyLead", leads IS NULL AS "oneLead", key_lead AS "pinnedKeyLead"`;

/** The key suffix of lead `lead` (an int expression) of `a`: NULL for its key lead. */
const suffixSql = (a: Prisma.Sql, lead: Prisma.Sql) => Prisma.sql`NULLIF(${lead}, ${keyLeadSql(a)})`;
/** The dedupe key of the reminder of lead `lead` of the slot appointment `a` holds now. */
export const heldKeySql = (a: Prisma.Sql, lead: Prisma.Sql) =>
  dedupeKeySql.appointmentReminder(Prisma.sql`${a}.id`, Prisma.sql`${a}.starts_at`, suffixSql(a, lead));
/** The dedupe keys of the reminders the slot of `a` holds now: one per lead planned (text[]). */
export const HELD_KEYS = Prisma.sql`ARRAY(SELECT ${heldKeySql(Prisma.sql`a`, Prisma.sql`u.lead`)}
  FROM unnest(${leadsSql(Prisma.sql`a`)}, ${plansSql(Prisma.sql`a`)}) AS u(lead, at) WHERE u.at IS NOT NULL)`;

/**
 * A slot and lead a reminder job was scheduled for: the appointment, the
 * start it then had (ms), and the lead (s; null: its key lead, the one lead
 * of bookings that had one).
 */
export type ReminderSlot = { readonly appointmentId: string; readonly startsAtMs: number; readonly leadSeconds?: number | null | undefined };
/** The dedupe key of a slot's reminder (the id as the database writes it). */
export const slotKey = (s: ReminderSlot): string => dedupeKey.appointmentReminder(s.appointmentId.toLowerCase(), s.startsAtMs, s.leadSeconds);
/** How a slot names lead `lead` of appointment `a`: null for its key lead. */
export const slotLead = (a: Pick<AppointmentRow, 'keyLead'>, lead: number): number | null => (lead === a.keyLead ? null : lead);

/** What reminderStates finds of a slot. */
export type ReminderState = {
  reminder: { id: string; status: NotificationStatus; live: boolean } | null;
  appointment: {
    id: string;
    status: 'BOOKED' | 'CANCELLED';
    startsAt: Date;
    /** The slot's lead planned on the slot held now (its time, `msToRemind` away), or null. */
    remindAt: Date | null;
    sameSlot: boolean;
    msToRemind: number;
  } | null;
};
