// The slot given up: an appointment moved (new start and/or lead) or
// cancelled, with its undelivered reminders of any slot it no longer holds
// withdrawn in the same transaction.
//
// Two statements in one transaction: the change, then the delivery room's
// withdrawal (core/delivery/withdraw.ts), which must be its own statement to
// see a reminder a writer committed while the change waited for the row lock.
// Guard: `client = <the caller's client> AND status = 'BOOKED'` (the
// withdrawal too looks only at the caller's client's appointment, so another
// client's id changes nothing). Lock order: the appointment, then its
// reminder rows. Returns the appointment as changed, or null when it was not
// BOOKED (or is unknown, or another client's). Any change of the booking
// clears its `reminded` mark (a trigger), so the reconciliation pass looks at
// it again.
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

/**
 * BOOKED -> new slot and/or lead; null when not BOOKED (or missing, or
 * another client's). In the same transaction, undelivered reminders of other
 * slots are withdrawn: a reminder must never go out for a slot the
 * appointment no longer has.
 */
export async function rescheduleAppointment(db: Db, client: string, id: string, startsAt: Date | null, lead: number | null): Promise<AppointmentRow | null> {
  const [rows] = await db.$transaction([
    db.$queryRaw<AppointmentRow[]>`
      UPDATE appointments
         SET starts_at = COALESCE(${startsAt}::timestamptz, starts_at),
             remind_before_seconds = COALESCE(${lead}::int, remind_before_seconds),
             remind_at = GREATEST(COALESCE(${startsAt}::timestamptz, starts_at)
                                  - make_interval(secs => COALESCE(${lead}::int, remind_before_seconds)), now()),
             updated_at = now()
       WHERE id = ${id}::uuid AND client = ${client} AND status = 'BOOKED'
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
