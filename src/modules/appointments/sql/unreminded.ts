// The reconciliation pass's read: BOOKED appointments whose current slot has
// a lead planned without a live reminder, overdue or coming within the
// horizon, with their leads not marked reminded.
import { Prisma } from '../../../generated/prisma/client.js';
import type { Db } from '../../../core/db.js';
import { liveSql } from '../../../core/delivery/index.js';
import { MAX_LEAD_SECONDS } from '../appointments.schemas.js';
import { MAX_QUIET_SHIFT_SECONDS } from '../quiet-hours.js';
import { heldKeySql, keyLeadSql, leadsSql, plansSql } from './appointment-row.js';

/**
 * Not marked reminded (the predicate of the partial index
 * appointments_unreminded_idx): the pass reads only these, then checks their
 * reminder rows. writeReminders marks each lead it wrote, and the
 * appointment once every planned lead is; its remind time is then the
 * next lead's still to be written. A trigger unmarks it
 * with any change of the booking (slot, status, updated_at), among them the
 * one way a slot's live reminder is withdrawn while it stays BOOKED: a move.
 */
const UNMARKED = Prisma.sql`NOT a.reminded`;

/**
 * BOOKED appointments with a lead planned without a live reminder (one
 * not withdrawn) for their current slot, whose remind time passed more than `graceSeconds`
 * ago and whose start is ahead or less than `afterStartSeconds` behind
 * (overdue), or whose remind time comes within `horizonMs`; in remind
 * order after a keyset cursor. Each branch reads an index range that
 * holds only what is ahead, and of the overdue only those not marked
 * reminded (the partial index of them by remind time, its range bounded
 * below by the start window and the longest lead; the index of BOOKED
 * appointments by remind time for the upcoming), never the history behind
 * nor the bookings reminded already; each candidate's reminder row decides.
 */
/** The pass's window: overdue by more than `graceSeconds` and started less than `afterStartSeconds` ago, or due within `horizonMs`. */
export type UnremindedWindow = { graceSeconds: number; afterStartSeconds: number; horizonMs: number };

/**
 * A lead of a candidate not marked reminded: as its slot names it (null: the
 * key lead), its planned time, and whether its reminder is live (written,
 * not marked: the write marks it again).
 */
export type UnmarkedLead = { lead: number | null; at: Date; live: boolean };

/** The planned leads of the slot `a` holds, not marked reminded, as u(lead, at). */
const unmarkedLeads = (a: Prisma.Sql) => Prisma.sql`unnest(${leadsSql(a)}, ${plansSql(a)}) AS u(lead, at)
  WHERE u.at IS NOT NULL AND NOT (u.lead = ANY(COALESCE(${a}.reminded_leads, ARRAY[]::int[])))`;
const liveHeld = (a: Prisma.Sql) =>
  Prisma.sql`EXISTS (SELECT 1 FROM notifications n WHERE n.dedupe_key = ${heldKeySql(a, Prisma.sql`u.lead`)} AND ${liveSql(Prisma.sql`n`)})`;

export async function listUnreminded(db: Db, w: UnremindedWindow, after: { remindAt: Date; id: string } | null, limit: number) {
  const a = Prisma.sql`a`;
  const unreminded = Prisma.sql`(${after?.remindAt ?? null}::timestamptz IS NULL OR (a.remind_at, a.id) > (${after?.remindAt ?? null}::timestamptz, ${after?.id ?? null}::uuid))
        AND EXISTS (SELECT 1 FROM ${unmarkedLeads(a)} AND NOT ${liveHeld(a)})`;
  const columns = Prisma.sql`a.id, a.remind_at AS "remindAt", a.starts_at AS "startsAt",
    (SELECT jsonb_agg(jsonb_build_object('lead', NULLIF(u.lead, ${keyLeadSql(a)}), 'at', u.at, 'live', ${liveHeld(a)}) ORDER BY u.at)
       FROM ${unmarkedLeads(a)}) AS leads`;
  const startWindow = Prisma.sql`make_interval(secs => ${w.afterStartSeconds}::int)`;
  // No parallel workers: the planner, guessing thousands of rows where a
  // few dozen come, starts two and waits some 35 ms for them (1 000 000
  // appointments of history: 60 ms a pass with them, 11 ms without).
  const [, rows] = await db.$transaction([
    db.$executeRaw`SET LOCAL max_parallel_workers_per_gather = 0`,
    db.$queryRaw<{ id: string; remindAt: Date; startsAt: Date; overdue: boolean; leads: { lead: number | null; at: string; live: boolean }[] }[]>`
      (SELECT ${columns}, true AS overdue FROM appointments a
        WHERE a.status = 'BOOKED' AND ${UNMARKED} AND a.starts_at > now() - ${startWindow}
          AND a.remind_at < now() - make_interval(secs => ${w.graceSeconds}::int)
          -- Implied by the start (a remind time is at most the longest lead, and a quiet-hours shift, before it): bounds the index range.
          AND a.remind_at > now() - make_interval(secs => ${w.afterStartSeconds}::int + ${MAX_LEAD_SECONDS + MAX_QUIET_SHIFT_SECONDS})
          AND ${unreminded}
        ORDER BY a.remind_at, a.id LIMIT ${limit})
      UNION ALL
      (SELECT ${columns}, false AS overdue FROM appointments a
        WHERE a.status = 'BOOKED' AND a.remind_at > now() AND a.remind_at <= now() + make_interval(secs => ${w.horizonMs}::double precision / 1000)
          AND ${unreminded}
        ORDER BY a.remind_at, a.id LIMIT ${limit})
      ORDER BY "remindAt", id
      LIMIT ${limit}`,
  ]);
  // jsonb gives times as text
  return rows.map((r) => ({ ...r, leads: r.leads.map((l): UnmarkedLead => ({ ...l, at: new Date(l.at) })) }));
}
