// What the appointments domain reads: an appointment by id or idempotency
// key, and its reminders: what a slot's reminder job finds when it wrote
// nothing, one slot and lead's reminder row, an appointment's reminder rows. The API's
// reads (an appointment, its reminders, a booking's replay) take the caller's
// client and find only its rows; the jobs' reads go by id.
import { Prisma } from '../../../generated/prisma/client.js';
import type { Db } from '../../../core/db.js';
import { type NotificationStatus, dedupeKey, liveSql } from '../../../core/delivery/index.js';
import { type AppointmentRow, COLUMNS, type ReminderSlot, type ReminderState, keyLeadSql, leadsSql, plansSql, slotKey } from './appointment-row.js';

/** Client `client`'s appointment `id`: another client's is null, as an unknown one. */
export async function findAppointment(db: Db, client: string, id: string): Promise<AppointmentRow | null> {
  return (await db.$queryRaw<AppointmentRow[]>`SELECT ${COLUMNS} FROM appointments WHERE id = ${id}::uuid AND client = ${client}`)[0] ?? null;
}

/** The booking made with an idempotency key (which names its client already; the client is checked all the same). */
export async function findAppointmentByIdempotencyKey(
  db: Db,
  client: string,
  key: string,
): Promise<{ row: AppointmentRow; requestHash: string | null } | null> {
  const rows = await db.$queryRaw<(AppointmentRow & { requestHash: string | null })[]>`
    SELECT ${COLUMNS}, request_hash AS "requestHash" FROM appointments WHERE idempotency_key = ${key} AND client = ${client}`;
  const r = rows[0];
  if (!r) return null;
  const { requestHash, ...row } = r;
  return { row, requestHash };
}

/**
 * What a slot's reminder job finds when it wrote nothing, for many slots
 * in one statement (one snapshot), by dedupe key: the slot's reminder row
 * if written (`live` unless withdrawn), and the appointment as it is now
 * (missing, not BOOKED, moved to another slot, its lead no longer planned
 * (`remindAt` null), or its lead's remind time `msToRemind` away by the
 * database clock).
 */
export async function reminderStates(db: Db, slots: readonly ReminderSlot[]): Promise<Map<string, ReminderState>> {
  if (slots.length === 0) return new Map();
  const a = Prisma.sql`a`;
  const rows = await db.$queryRaw<(ReminderState & { key: string })[]>`
    SELECT s.key,
           CASE WHEN n.id IS NULL THEN NULL ELSE jsonb_build_object('id', n.id, 'status', n.status, 'live', ${liveSql(Prisma.sql`n`)}) END AS reminder,
           CASE WHEN a.id IS NULL THEN NULL ELSE jsonb_build_object(
             'id', a.id, 'status', a.status, 'startsAt', a.starts_at, 'remindAt', l.at,
             'sameSlot', floor(extract(epoch FROM a.starts_at) * 1000)::bigint = s.ms,
             'msToRemind', GREATEST(0, ceil(extract(epoch FROM COALESCE(l.at, now()) - now()) * 1000))::int) END AS appointment
      FROM unnest(${slots.map((x) => x.appointmentId)}::uuid[], ${slots.map((x) => x.startsAtMs)}::bigint[], ${slots.map((x) => x.leadSeconds ?? null)}::int[],
                  ${slots.map(slotKey)}::text[]) AS s(id, ms, lead, key)
      LEFT JOIN appointments a ON a.id = s.id
      -- The slot's lead as planned now (null: not planned, or named by another spelling than the appointment's).
      LEFT JOIN LATERAL (SELECT u.at FROM unnest(${leadsSql(a)}, ${plansSql(a)}) AS u(lead, at)
                          WHERE u.lead = COALESCE(s.lead, ${keyLeadSql(a)}) AND (s.lead IS NULL OR s.lead <> ${keyLeadSql(a)}) LIMIT 1) l ON true
      LEFT JOIN notifications n ON n.dedupe_key = s.key`;
  return new Map(
    rows.map(({ key, reminder, appointment }) => [
      key,
      {
        reminder,
        // jsonb gives times as text
        appointment: appointment && {
          ...appointment,
          startsAt: new Date(appointment.startsAt),
          remindAt: appointment.remindAt === null ? null : new Date(appointment.remindAt),
        },
      },
    ]),
  );
}

/** The reminder row of one slot and lead (null: the key lead), if written; `live` unless it was withdrawn (CANCELLED, or withdrawn while being sent). */
export async function findReminder(
  db: Db,
  id: string,
  startsAtMs: number,
  leadSeconds: number | null = null,
): Promise<{ id: string; status: NotificationStatus; live: boolean } | null> {
  const rows = await db.$queryRaw<{ id: string; status: NotificationStatus; live: boolean }[]>`
    SELECT n.id, n.status::text AS status, ${liveSql(Prisma.sql`n`)} AS live
      FROM notifications n WHERE n.dedupe_key = ${dedupeKey.appointmentReminder(id, startsAtMs, leadSeconds)}`;
  return rows[0] ?? null;
}

/** Client `client`'s reminder rows of appointment `id`, oldest first (none for another client's). */
export function listReminders(db: Db, client: string, id: string) {
  return db.notification.findMany({
    where: { appointmentId: id, kind: 'APPOINTMENT_REMINDER', client },
    orderBy: [{ createdAt: 'asc' }, { id: 'asc' }],
  });
}
