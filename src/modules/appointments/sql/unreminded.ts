// The reconciliation pass's read: BOOKED appointments whose current slot has
// no live reminder, overdue or coming within the horizon.
import { Prisma } from '../../../generated/prisma/client.js';
import type { Db } from '../../../core/db.js';
import { liveSql } from '../../../core/delivery/index.js';
import { MAX_LEAD_SECONDS } from '../appointments.schemas.js';
import { MAX_QUIET_SHIFT_SECONDS } from '../quiet-hours.js';
import { HELD_SLOT_KEY } from './appointment-row.js';

/**
 * Not marked reminded (the predicate of the partial index
 * appointments_unreminded_idx): the pass reads only these, then checks their
 * reminder rows. writeReminder marks its appointment; a trigger unmarks it
 * with any change of the booking (slot, status, updated_at), among them the
 * one way a slot's live reminder is withdrawn while it stays BOOKED: a move.
 */
const UNMARKED = Prisma.sql`NOT a.reminded`;

/**
 * BOOKED appointments without a live reminder (one not withdrawn) for
 * their current slot whose remind time passed more than `graceSeconds`
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

export async function listUnreminded(db: Db, w: UnremindedWindow, after: { remindAt: Date; id: string } | null, limit: number) {
  const unreminded = Prisma.sql`(${after?.remindAt ?? null}::timestamptz IS NULL OR (a.remind_at, a.id) > (${after?.remindAt ?? null}::timestamptz, ${after?.id ?? null}::uuid))
        AND NOT EXISTS (SELECT 1 FROM notifications n WHERE n.dedupe_key = ${HELD_SLOT_KEY} AND ${liveSql(Prisma.sql`n`)})`;
  const columns = Prisma.sql`a.id, a.remind_at AS "remindAt", a.starts_at AS "startsAt"`;
  const startWindow = Prisma.sql`make_interval(secs => ${w.afterStartSeconds}::int)`;
  // No parallel workers: the planner, guessing thousands of rows where a
  // few dozen come, starts two and waits some 35 ms for them (1 000 000
  // appointments of history: 60 ms a pass with them, 11 ms without).
  const [, rows] = await db.$transaction([
    db.$executeRaw`SET LOCAL max_parallel_workers_per_gather = 0`,
    db.$queryRaw<{ id: string; remindAt: Date; startsAt: Date; overdue: boolean }[]>`
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
  return rows;
}
