// Reminded: the reminder of each slot still held and due is written (or a
// withdrawn one taken back), and the appointment marked reminded.
//
// One statement for the reminder jobs of a batch or the pass's overdue page,
// each slot judged on its own: written only if the appointment is BOOKED,
// still starts at the slot's start and its remind time has come (database
// clock), and only once per slot (its dedupe key). A slot held again after it
// was given up gets its withdrawn reminder back (core/delivery/take-back.ts).
// A job's statement, by id: no client filter, each reminder written with its
// appointment's client.
// Guard: the appointment row as the statement locks it. Lock order: the
// appointments in id order (FOR UPDATE: two such statements sharing some wait
// for each other rather than deadlock, and a concurrent move either commits
// first, leaving no reminder for the old slot, or waits and then withdraws
// it), then the reminder rows. Returns what was written or taken back, by the
// reminder's dedupe key (slotKey): `fresh` when its delivery must be scheduled
// afresh (PENDING, or FAILED refused: its job puts it in the dead set).
import { Prisma } from '../../../generated/prisma/client.js';
import type { Db } from '../../../core/db.js';
import { type WrittenOrTakenBack, deliveryInsertSql, takeBackOnConflictSql } from '../../../core/delivery/index.js';
import { HELD_SLOT_KEY, type ReminderSlot } from './appointment-row.js';

/** The reminder of the slot `a` holds (a row of `w`, locked by the writing statement). */
const REMINDER_FROM_W = deliveryInsertSql({
  kind: 'APPOINTMENT_REMINDER',
  from: Prisma.sql`w a`,
  dedupeKey: HELD_SLOT_KEY,
  subject: { column: 'appointment_id', value: Prisma.sql`a.id` },
  client: Prisma.sql`a.client`,
  channel: Prisma.sql`a.channel`,
  recipient: Prisma.sql`a.contact`,
  payload: Prisma.sql`jsonb_build_object('appointmentId', a.id, 'customerId', a.customer_id,
                                         'startsAt', to_char(a.starts_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))`,
});

export async function writeReminders(db: Db, slots: readonly ReminderSlot[]): Promise<Map<string, { id: string; fresh: boolean }>> {
  if (slots.length === 0) return new Map();
  const ids = slots.map((x) => x.appointmentId);
  const rows = await db.$queryRaw<WrittenOrTakenBack[]>`
    WITH a AS (
      SELECT id, client, customer_id, contact, channel, starts_at, reminded FROM appointments
       WHERE id = ANY(${ids}::uuid[])
         -- Compared in whole ms: a float round trip through seconds could miss by a microsecond.
         AND (id, floor(extract(epoch FROM starts_at) * 1000)::bigint) IN (SELECT * FROM unnest(${ids}::uuid[], ${slots.map((x) => x.startsAtMs)}::bigint[]))
         -- As text and through an expression, which no index holds: the
         -- rows are found by their ids, whatever the statistics say (read
         -- through the index of BOOKED appointments by remind time, a batch
         -- would read every appointment due).
         AND status::text = 'BOOKED' AND remind_at + interval '0' <= now()
       ORDER BY id
       FOR UPDATE
    ), marked AS (
      -- Whatever the insert below finds, the slot has a live reminder after this statement.
      UPDATE appointments SET reminded = true FROM a WHERE appointments.id = a.id
    ), w AS (
      -- A slot marked reminded has its live reminder (a writer that came
      -- first committed its mark with it, and any change of the booking
      -- since would have cleared the mark): nothing is inserted for it.
      -- ON CONFLICT would lock that reminder too, even to change nothing,
      -- while this statement goes on locking the next appointments, and the
      -- deliveries' claims and SENT marks lock such rows in their own order
      -- (a deadlock). Not a look at the reminders themselves: this
      -- statement's snapshot may predate a move away and back that withdrew
      -- the reminder it would see live.
      SELECT * FROM a WHERE NOT a.reminded
    )
    ${REMINDER_FROM_W}
    ${takeBackOnConflictSql}`;
  return new Map(rows.map((r) => [r.key, { id: r.id, fresh: r.fresh }]));
}
