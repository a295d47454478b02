// Abandoned: the relay pass found rows whose delivery job is gone for good
// (dead-lettered before the outcome was recorded: its workers crashed on every
// attempt, or the database was away when the last attempt failed), so the
// row is settled instead of waiting for ever.
//
// One statement over the page of such rows. Guard: PENDING, or SENDING for
// longer than `sendingSeconds` (a call whose outcome was never recorded); a
// row claimed since it was found (an operator redrove the job meanwhile:
// SENDING afresh) is left to that delivery. Next: CANCELLED if withdrawn,
// else FAILED, last_error saying why (a call's outcome unknown, or given up
// before it was recorded). An operator's redrive asked is kept: the redriven
// job sends a FAILED one again. Rows found by id whatever the statistics say
// (the status compared as text, as claim.ts does). Lock order: the rows, in
// id order (contract.ts). Returns the number settled.
import { Prisma } from '../../generated/prisma/client.js';
import type { Db } from '../db.js';
import { rowsLockedInOrderSql } from './contract.js';

export async function markAbandoned(db: Db, ids: readonly string[], sendingSeconds: number): Promise<number> {
  if (ids.length === 0) return 0;
  const abandonable = (n: Prisma.Sql) =>
    Prisma.sql`(${n}.status::text = 'PENDING' OR (${n}.status::text = 'SENDING' AND ${n}.sending_at < now() - make_interval(secs => ${sendingSeconds})))`;
  return db.$executeRaw`
    UPDATE notifications
       SET status = (CASE WHEN withdrawn_at IS NOT NULL THEN 'CANCELLED' ELSE 'FAILED' END)::"NotificationStatus",
           last_error = CASE
             WHEN status = 'SENDING' THEN 'delivery given up: its job was dead-lettered during a call whose outcome is unknown'
             WHEN withdrawn_at IS NOT NULL THEN last_error
             ELSE 'delivery given up: its job was dead-lettered before the outcome was recorded (see the dead set)' END
     WHERE ${rowsLockedInOrderSql(Prisma.sql`${[...ids]}::uuid[]`, abandonable)}`;
}
