// Failed: the call did not go through (an error, a timeout, a non-2xx), or
// the receiver refused it (a 4xx other than 408/429).
//
// One statement: the attempt counted and the next status decided on the row
// as it is now. Guard: SENDING (the call this delivery claimed; a row another
// delivery finished is left alone). Next: CANCELLED if it was withdrawn
// during the call (nothing left to retry), FAILED on the last attempt or a
// refusal, else PENDING for the retry. A refusal or a last failure outranks a
// redrive an operator asked while the call ran. Lock order: the one row.
// Returns the new status, or null when the row was not SENDING.
import type { Db } from '../db.js';
import type { NotificationStatus } from './contract.js';

export async function recordFailure(db: Db, id: string, error: string, final: boolean, refused: boolean): Promise<NotificationStatus | null> {
  const rows = await db.$queryRaw<{ status: NotificationStatus }[]>`
    UPDATE notifications
       SET attempts = attempts + 1, last_error = ${error},
           status = (CASE WHEN withdrawn_at IS NOT NULL THEN 'CANCELLED' WHEN ${final} THEN 'FAILED' ELSE 'PENDING' END)::"NotificationStatus",
           redrive_requested = redrive_requested AND NOT ${final},
           refused = ${refused}
     WHERE id = ${id}::uuid AND status = 'SENDING'
    RETURNING status::text AS status`;
  return rows[0]?.status ?? null;
}
