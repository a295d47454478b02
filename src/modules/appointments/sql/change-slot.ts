// The slot given up: an appointment moved (new start, leads and/or zone) or
// cancelled, with its undelivered reminders of any slot and lead it no longer
// holds withdrawn in the same transaction.
//
// Two statements in one transaction: the change, then the delivery room's
// withdrawal (core/delivery/withdraw.ts), which must be its own statement to
// see a reminder a writer committed while the change waited for the row lock.
// Guard: `client = <the caller's client> AND status = 'BOOKED'` (the
// withdrawal too looks only at the caller's client's appointment, so another
// client's id changes nothing), and for a move the start, leads, their
// planned times, the zone, the storage form and the key lead as stored its
// plan was made from (quiet hours are wall-clock arithmetic done by the
// service, so the statement takes the times planned and holds the booking to
// what they were planned from; a reminder written since may have pinned the
// key lead, which a plan made before would hand to another lead).
// Lock order: the appointment, then its reminder rows. Returns the
// appointment as changed, or null when it was not BOOKED (or is unknown, or
// another client's) or no longer as planned from. Any change of the booking
// clears its `reminded` marks (a trigger), so the reconciliation pass looks
// at it again.
import { Prisma } from '../../../generated/prisma/client.js';
import type { Db } from '../../../core/db.js';
import { withdrawSql } from '../../../core/delivery/index.js';
import type { LeadPlan } from '../lead-plan.js';
import { type AppointmentRow, COLUMNS, HELD_KEYS } from './appointment-row.js';

/**
 * Withdraws the undelivered reminders of client `client`'s appointment `id`
 * for any slot and lead it no longer holds (every one once cancelled), with
 * `reason`: the delivery room's withdrawal (core/delivery/withdraw.ts), run
 * as its own statement after the change, in the change's transaction.
 */
const withdrawReminders = (client: string, id: string, reason: string) =>
  withdrawSql({
    kind: 'APPOINTMENT_REMINDER',
    subject: 'appointment_id',
    from: Prisma.sql`(SELECT a.id, CASE WHEN a.status = 'CANCELLED' THEN NULL ELSE ${HELD_KEYS} END AS kept_keys
                        FROM appointments a WHERE a.id = ${id}::uuid AND a.client = ${client}) s`,
    keptMany: true,
    reason,
  });

/** A booking's slot, leads and zone: what a move was planned from. */
export type SlotPlan = {
  startsAt: Date;
  remindBeforeSeconds: number;
  timeZone: string | null;
  leads?: readonly number[];
  leadRemindAt?: readonly (Date | null)[];
  /** Stored without a list of leads (AppointmentRow.oneLead). */
  oneLead?: boolean;
  /** key_lead as stored (AppointmentRow.pinnedKeyLead). */
  pinnedKeyLead?: number | null;
};
/**
 * A move's plan: the booking it was planned from (`was`), the zone it keeps,
 * the remind time planned and, for several leads (or a booking that had
 * several), each lead's plan, longest first, with the lead that keeps the key
 * without a lead; without `leads`, one lead, its key lead.
 */
export type MovePlan = { was: SlotPlan; timeZone: string | null; remindAt: Date; leads?: readonly LeadPlan[]; keyLead?: number };

/**
 * BOOKED -> the new slot `startsAt` and/or lead (null: kept), reminded at
 * `plan.remindAt` (now if that has passed), each of `plan.leads` at its
 * planned time, if the booking is still as `plan.was` says; without a plan,
 * one lead at the start less the lead by the database's arithmetic (no quiet
 * hours). Null when not BOOKED (or missing,
 * or another client's) or no longer as planned from (a change committed
 * since it was read: the caller plans again). In the same transaction,
 * undelivered reminders of other slots are withdrawn: a reminder must never
 * go out for a slot the appointment no longer has.
 */
export async function rescheduleAppointment(
  db: Db,
  client: string,
  id: string,
  startsAt: Date | null,
  lead: number | null,
  plan?: MovePlan,
): Promise<AppointmentRow | null> {
  const start = Prisma.sql`COALESCE(${startsAt}::timestamptz, starts_at)`;
  const was = plan?.was;
  const asPlanned = was
    ? Prisma.sql`floor(extract(epoch FROM starts_at) * 1000)::bigint = ${was.startsAt.getTime()}::bigint AND remind_before_seconds = ${was.remindBeforeSeconds}::int
                 AND time_zone IS NOT DISTINCT FROM ${was.timeZone}::text
                 AND COALESCE(leads, ARRAY[remind_before_seconds]) = ${[...(was.leads ?? [was.remindBeforeSeconds])]}::int[]
                 ${was.leadRemindAt ? Prisma.sql`AND COALESCE(lead_remind_at, ARRAY[remind_at]) IS NOT DISTINCT FROM ${[...was.leadRemindAt]}::timestamptz[]` : Prisma.empty}
                 ${was.oneLead === undefined ? Prisma.empty : Prisma.sql`AND (leads IS NULL) = ${was.oneLead}::boolean`}
                 ${was.pinnedKeyLead === undefined ? Prisma.empty : Prisma.sql`AND key_lead IS NOT DISTINCT FROM ${was.pinnedKeyLead}::int`}`
    : Prisma.sql`true`;
  const many = plan?.leads;
  // Several leads: each planned time made the statement's moment when it has passed, a skipped one kept null.
  const leadsSet = many
    ? Prisma.sql`leads = ${many.map((l) => l.lead)}::int[],
             lead_remind_at = ARRAY(SELECT CASE WHEN p.at IS NULL THEN NULL ELSE GREATEST(p.at, now()) END
                                      FROM unnest(${many.map((l) => l.at)}::timestamptz[]) WITH ORDINALITY AS p(at, i) ORDER BY p.i),
             key_lead = ${plan?.keyLead ?? null}::int,`
    : // One lead: its reminder keeps the key without a lead, as one-lead bookings always had; the
      // lead that key was written for on this slot carried (a new slot: none).
      Prisma.sql`leads = NULL, lead_remind_at = NULL, key_lead = ${plan?.keyLead ?? null}::int,`;
  const [rows] = await db.$transaction([
    db.$queryRaw<AppointmentRow[]>`
      UPDATE appointments
         SET starts_at = ${start},
             remind_before_seconds = COALESCE(${many?.[0]?.lead ?? lead}::int, remind_before_seconds),
             time_zone = ${plan ? Prisma.sql`${plan.timeZone}::text` : Prisma.sql`time_zone`},
             ${leadsSet}
             remind_at = GREATEST(COALESCE(${plan?.remindAt ?? null}::timestamptz,
                                           ${start} - make_interval(secs => COALESCE(${lead}::int, remind_before_seconds))), now()),
             updated_at = now()
       WHERE id = ${id}::uuid AND client = ${client} AND status = 'BOOKED' AND ${asPlanned}
      RETURNING ${COLUMNS}`,
    db.$executeRaw(withdrawReminders(client, id, 'appointment moved before the reminder was delivered')),
  ]);
  return rows[0] ?? null;
}

/** BOOKED -> CANCELLED, withdrawing undelivered reminders; null when it was not BOOKED (or not the client's). */
export async function cancelAppointment(db: Db, client: string, id: string): Promise<AppointmentRow | null> {
  const [rows] = await db.$transaction([
    db.$queryRaw<AppointmentRow[]>`
      UPDATE appointments SET status = 'CANCELLED', cancelled_at = now(), updated_at = now()
       WHERE id = ${id}::uuid AND client = ${client} AND status = 'BOOKED'
      RETURNING ${COLUMNS}`,
    db.$executeRaw(withdrawReminders(client, id, 'appointment cancelled before the reminder was delivered')),
  ]);
  return rows[0] ?? null;
}
