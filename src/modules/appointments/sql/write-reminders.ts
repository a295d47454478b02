// Reminded: the reminder of each slot and lead still held and due is written
// (or a withdrawn one taken back), and the lead marked reminded.
//
// One statement for the reminder jobs of a batch or the pass's overdue page,
// each slot and lead judged on its own: written only if the appointment is
// BOOKED, still starts at the slot's start, still has the lead planned, and
// the lead's remind time has come (database clock), and only once per slot
// and lead (its dedupe key). A slot held again after it was given up gets its
// withdrawn reminders back (core/delivery/take-back.ts).
// A job's statement, by id: no client filter, each reminder written with its
// appointment's client.
// Guard: the appointment row as the statement locks it. Lock order: the
// appointments in id order (FOR UPDATE: two such statements sharing some wait
// for each other rather than deadlock, and a concurrent move either commits
// first, leaving no reminder for the old slot or a lead dropped, or waits and
// then withdraws it), then the reminders it takes back, in id order, before
// the insert writes its first row (take-back.ts), then the new ones.
// Returns what was written or taken back, by the reminder's dedupe key
// (slotKey): `fresh` when its delivery must be scheduled afresh (PENDING, or
// FAILED refused: its job puts it in the dead set).
import { Prisma } from '../../../generated/prisma/client.js';
import type { Db } from '../../../core/db.js';
import {
  type WrittenOrTakenBack,
  dedupeKeySql,
  deliveryInsertSql,
  liveSql,
  takeBackLockedFirstSql,
  takeBackOnConflictSql,
} from '../../../core/delivery/index.js';
import { type ReminderSlot, keyLeadSql, leadsSql, plansSql } from './appointment-row.js';

/** The reminders to write: one per slot and lead of `w`. */
const WRITTEN = {
  from: Prisma.sql`w a`,
  // The slot's own naming of its lead: null for the key lead (the statement refuses any other spelling of it).
  dedupeKey: dedupeKeySql.appointmentReminder(Prisma.sql`a.id`, Prisma.sql`a.starts_at`, Prisma.sql`a.slot_lead`),
};

/** The reminder of the slot and lead `a` is due for (a row of `w`, its appointment locked by the writing statement). */
const REMINDER_FROM_W = deliveryInsertSql({
  kind: 'APPOINTMENT_REMINDER',
  ...WRITTEN,
  where: takeBackLockedFirstSql(WRITTEN),
  subject: { column: 'appointment_id', value: Prisma.sql`a.id` },
  client: Prisma.sql`a.client`,
  channel: Prisma.sql`a.channel`,
  recipient: Prisma.sql`a.contact`,
  // The one-lead form's reminder is the slot's one reminder, whatever its lead
  // becomes (a move back with another lead takes it back, and a take-back
  // keeps the payload): it names no lead, as before there were several.
  payload: Prisma.sql`jsonb_build_object('appointmentId', a.id, 'customerId', a.customer_id,
                                         'startsAt', to_char(a.starts_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
                      || CASE WHEN a.leads IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('leadSeconds', a.lead) END`,
});

export async function writeReminders(db: Db, slots: readonly ReminderSlot[]): Promise<Map<string, { id: string; fresh: boolean }>> {
  if (slots.length === 0) return new Map();
  const ids = slots.map((x) => x.appointmentId);
  const a = Prisma.sql`a`;
  const rows = await db.$queryRaw<WrittenOrTakenBack[]>`
    WITH s AS (
      SELECT * FROM unnest(${ids}::uuid[], ${slots.map((x) => x.startsAtMs)}::bigint[], ${slots.map((x) => x.leadSeconds ?? null)}::int[]) AS s(id, ms, lead)
    ), a AS (
      SELECT id, client, customer_id, contact, channel, starts_at, reminded, reminded_leads, leads, lead_remind_at, key_lead,
             remind_before_seconds, remind_at
        FROM appointments
       WHERE id = ANY(${ids}::uuid[])
         -- Compared in whole ms: a float round trip through seconds could miss by a microsecond.
         AND (id, floor(extract(epoch FROM starts_at) * 1000)::bigint) IN (SELECT s.id, s.ms FROM s)
         -- As text, which no index holds: the rows are found by their ids,
         -- whatever the statistics say (read through the index of BOOKED
         -- appointments by remind time, a batch would read every appointment due).
         AND status::text = 'BOOKED'
         -- Only what has a lead due: remind_at is the earliest planned time
         -- of a lead not marked, so a row past it is all the statement can
         -- write for (the rest is not locked; through an expression, as above).
         AND remind_at + interval '0' <= now()
       ORDER BY id
       FOR UPDATE
    ), d AS (
      -- Each slot's lead, still planned on the slot held and due by the database clock.
      SELECT DISTINCT ON (a.id, l.lead) a.*, l.lead, s.lead AS slot_lead
        FROM a JOIN s ON s.id = a.id AND s.ms = floor(extract(epoch FROM a.starts_at) * 1000)::bigint
        CROSS JOIN LATERAL unnest(${leadsSql(a)}, ${plansSql(a)}) AS l(lead, at)
       WHERE l.lead = COALESCE(s.lead, ${keyLeadSql(a)}) AND (s.lead IS NULL OR s.lead <> ${keyLeadSql(a)})
         AND l.at IS NOT NULL AND l.at + interval '0' <= now()
    ), m AS (
      SELECT a.id, ${leadsSql(a)} AS leads, ${plansSql(a)} AS plans,
             ARRAY(SELECT DISTINCT x FROM unnest(COALESCE(a.reminded_leads, ARRAY[]::int[]) || (SELECT array_agg(d.lead) FROM d WHERE d.id = a.id)) AS x) AS marks
        FROM a WHERE EXISTS (SELECT 1 FROM d WHERE d.id = a.id)
    ), w AS (
      -- A lead marked has its live reminder (a writer that came first
      -- committed its mark with it, and any change of the booking since
      -- would have cleared the mark): nothing is inserted for it. ON
      -- CONFLICT would lock that reminder too, even to change nothing, while
      -- this statement goes on locking the next appointments, and the
      -- deliveries' claims and SENT marks lock such rows in their own order
      -- (a deadlock). Not a look at the reminders themselves: this
      -- statement's snapshot may predate a move away and back that withdrew
      -- the reminder it would see live.
      SELECT * FROM d WHERE NOT d.reminded AND NOT (d.lead = ANY(COALESCE(d.reminded_leads, ARRAY[]::int[])))
    ), marked AS (
      -- Whatever the insert below finds, each lead due has a live reminder
      -- after this statement: marked, and the appointment's remind time made
      -- the next lead's still to be written (the pass reads it), or, with
      -- none left, the appointment marked reminded. A one-lead booking whose
      -- key's reminder is written now (none live under it) has its key lead
      -- pinned to that lead: a list it takes on this slot keeps the key with
      -- it, so no lead of the slot is written under two keys.
      UPDATE appointments p
         SET reminded_leads = m.marks,
             reminded = NOT EXISTS (SELECT 1 FROM unnest(m.leads, m.plans) AS u(lead, at) WHERE u.at IS NOT NULL AND NOT (u.lead = ANY(m.marks))),
             remind_at = COALESCE((SELECT min(u.at) FROM unnest(m.leads, m.plans) AS u(lead, at) WHERE u.at IS NOT NULL AND NOT (u.lead = ANY(m.marks))), p.remind_at),
             key_lead = CASE WHEN p.leads IS NULL AND EXISTS (SELECT 1 FROM w WHERE w.id = p.id AND w.slot_lead IS NULL)
                              AND NOT EXISTS (SELECT 1 FROM notifications n
                                               WHERE n.dedupe_key = ${dedupeKeySql.appointmentReminder(Prisma.sql`p.id`, Prisma.sql`p.starts_at`)} AND ${liveSql(Prisma.sql`n`)})
                             THEN p.remind_before_seconds ELSE p.key_lead END
        FROM m WHERE p.id = m.id
    )
    ${REMINDER_FROM_W}
    ${takeBackOnConflictSql}`;
  return new Map(rows.map((r) => [r.key, { id: r.id, fresh: r.fresh }]));
}
