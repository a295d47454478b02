// Cancelled by its owner: a row not being delivered and not delivered (a
// timer cancelled by its client) is given up, CANCELLED and withdrawn, so no
// call starts from now on.
//
// One statement, judged on the row as it is when it runs: a delivery that
// claimed it first keeps it (its call decides; the caller answers that it is
// being delivered), one claiming it after finds it CANCELLED. Unlike a
// withdrawal (withdraw.ts), a SENDING row is left alone entirely: the owner
// is told the truth (a delivery is in flight) and may cancel again if that
// call fails. Guard: PENDING, or FAILED (given up or refused), not withdrawn.
// A redrive request is spent with it. Lock order: the caller's subject row,
// then this row. Returns whether it was cancelled here.
import type { Db } from '../db.js';

export async function cancelDelivery(db: Pick<Db, '$executeRaw'>, id: string, reason: string): Promise<boolean> {
  const n = await db.$executeRaw`
    UPDATE notifications SET status = 'CANCELLED', withdrawn_at = now(), last_error = ${reason}, redrive_requested = false
     WHERE id = ${id}::uuid AND status IN ('PENDING', 'FAILED') AND withdrawn_at IS NULL`;
  return n === 1;
}
