// Moved: a row still waiting for its first call, or for a retry, gets a new
// due time and payload (a timer changed or pushed before it fired), and is
// tried from its first attempt.
//
// One statement: the row is judged as it is when the statement runs, so a
// delivery that claimed it first keeps it (its call decides; the caller
// answers that the row is being delivered) and one claiming it after finds
// the new due time (claim.ts answers `early` to a delivery due before it).
// Guard: PENDING and not withdrawn. Lock order: the caller's subject row
// (the timer) first, then this row. Returns whether it was moved.
import type { Db } from '../db.js';

export async function moveDelivery(db: Pick<Db, '$executeRaw'>, id: string, dueAt: Date, payload: unknown): Promise<boolean> {
  const n = await db.$executeRaw`
    UPDATE notifications SET due_at = ${dueAt}, payload = ${JSON.stringify(payload)}::jsonb, attempts = 0, last_error = NULL
     WHERE id = ${id}::uuid AND status = 'PENDING' AND withdrawn_at IS NULL`;
  return n === 1;
}
