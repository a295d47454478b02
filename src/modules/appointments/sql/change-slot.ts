// The slot given up: an appointment moved (new start and/or lead) or
// cancelled, with its undelivered reminders of any slot it no longer holds
// withdrawn in the same transaction.
//
// Two statements in one transaction: the change, then the delivery room's
// withdrawal (core/delivery/withdraw.ts), which must be its own statement to
// see a reminder a writer committed while the change waited for the row lock.
// Guard: `client = <the caller's client> AND status = 'BOOKED'` (the
// withdrawal too looks only at the caller's client's appointment, so another
// client's id changes nothing), and for a move the start, lead and time zone
// its remind time was planned from (quiet hours are wall-clock arithmetic
// done by the service, so the statement takes the time planned and holds the
// booking to what it was planned from). Lock order: the appointment, then its
// reminder rows. Returns the appointment as changed, or null when it was not
// BOOKED (or is unknown, or another client's) or no longer as planned from.
// Any change of the booking clears its `reminded` mark (a trigger), so the
// reconciliation pass looks at it again.
import { Prisma } from '../../../generated/prisma/client.js';
import type { Db } from '../../../core/db.js';
import { withdrawSql } from '../../../core/delivery/index.js';
import { type AppointmentRow, COLUMNS, HELD_SLOT_KEY } from './appointment-row.js';

/**
 * Withdraws the undelivered reminders of client `client`'s appointment `id`
 * for any slot it no longer holds (every slot once cancelled), with
 * `reason`: the delivery room's withdrawal (core/delivery/withdraw.ts), run
 * as its own statement after the change, in the change's transaction.
 */
const withdrawReminders = (client: string, id: string, reason: string) =>
  withdrawSql({
    kind: 'APPOINTMENT_REMINDER',
    subject: 'appointment_id',
    from: Prisma.sql`(SELECT a.id, CASE WHEN a.status = 'CANCELLED' THEN NULL ELSE ${HELD_SLOT_KEY} END AS kept_key
                        FROM appointments a WHERE a.id = ${id}::uuid AND a.client = ${client}) s`,
    reason,
  });

/** A booking's slot, lead and zone: what a move was planned from. */
export type SlotPlan = { startsAt: Date; remindBeforeSeconds: number; timeZone: string | null };
/** A move's plan: the booking it was planned from (`was`), the zone it keeps and the remind time planned. */
export type MovePlan = { was: SlotPlan; timeZone: string | null; remindAt: Date };

/**
 * BOOKED -> the new slot `startsAt` and/or lead (null: kept), reminded at
 * `plan.remindAt` (now if that has passed) if the booking is still as
 * `plan.was` says; without a plan, at the start less the lead by the
 * database's arithmetic (no quiet hours). Null when not BOOKED (or missing,
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
  const asPlanned = plan
    ? Prisma.sql`floor(extract(epoch FROM starts_at) * 1000)::bigint = ${plan.was.startsAt.getTime()}::bigint AND remind_before_seconds = ${plan.was.remindBeforeSeconds}::int
                 AND time_zone IS NOT DISTINCT FROM ${plan.was.timeZone}::text`
    : Prisma.sql`true`;
  const [rows] = await db.$transaction([
    db.$queryRaw<AppointmentRow[]>`
      UPDATE appointments
         SET starts_at = ${start},
             remind_before_seconds = COALESCE(${lead}::int, remind_before_seconds),
             time_zone = ${plan ? Prisma.sql`${plan.timeZone}::text` : Prisma.sql`time_zone`},
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
