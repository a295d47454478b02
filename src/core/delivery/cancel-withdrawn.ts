// Withdrawn, ended: a delivery found its row withdrawn (claim.ts answered
// `withdrawn`) and no call of it can still be running, so the row is
// CANCELLED rather than left to the next delivery.
//
// One statement. Guard: still withdrawn (its subject may have held the event
// again meanwhile: take-back.ts cleared the mark, and the row is the
// delivery's again) and not settled (PENDING, FAILED or SENDING). A row left
// SENDING by a delivery that died mid-call: whether that call got through is
// unknown; it is not made again (a reminder must not reach a customer who gave
// up the slot), and last_error says so. An operator's redrive that brought the
// delivery here is spent with it (left set, retention would keep the row for
// ever as still to deliver). Lock order: the one row.
// Returns whether the row was ended here.
import type { Db } from '../db.js';

export async function cancelWithdrawn(db: Db, id: string): Promise<boolean> {
  const n = await db.$executeRaw`
    UPDATE notifications
       SET status = 'CANCELLED',
           redrive_requested = false,
           last_error = CASE WHEN status = 'SENDING' THEN 'withdrawn; the outcome of a call interrupted before it was recorded is unknown'
                             ELSE last_error END
     WHERE id = ${id}::uuid AND withdrawn_at IS NOT NULL AND status IN ('PENDING', 'FAILED', 'SENDING')`;
  return n === 1;
}
