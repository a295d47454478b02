// Taken back: the subject holds again what it gave up (an appointment moved
// away from a slot and back), so the write of its row meets the withdrawn row
// of the same business event and revives it instead of making a second one.
//
// The ON CONFLICT clause of a deliveryInsertSql (write.ts), so it is one
// statement with the write and with the business check that decided it (the
// slot is held and due). Guard: only a CANCELLED or withdrawn row is touched;
// a live one (PENDING, SENDING, SENT, FAILED unwithdrawn) is left as it is,
// one per event. A CANCELLED row is PENDING again from its first attempt,
// unless the receiver refused it (FAILED: only an operator's redrive calls it
// again); a withdrawn row still SENDING just loses its withdrawal, its
// delivery job still its own. Lock order: the conflicting row, after the
// caller's subject rows. Returns per row written or taken back: its dedupe
// key, id, and `fresh` (PENDING or FAILED now: its delivery must be scheduled
// afresh, the old job may be gone or dead).
import { Prisma } from '../../generated/prisma/client.js';

export const takeBackOnConflictSql = Prisma.sql`
  ON CONFLICT (dedupe_key) DO UPDATE
     SET status = (CASE WHEN notifications.status <> 'CANCELLED' THEN notifications.status
                        WHEN notifications.refused THEN 'FAILED' ELSE 'PENDING' END)::"NotificationStatus",
         attempts = CASE WHEN notifications.status = 'CANCELLED' AND NOT notifications.refused THEN 0 ELSE notifications.attempts END,
         last_error = CASE WHEN notifications.status = 'CANCELLED' AND NOT notifications.refused THEN NULL ELSE notifications.last_error END,
         withdrawn_at = NULL
   WHERE notifications.status = 'CANCELLED' OR notifications.withdrawn_at IS NOT NULL
  RETURNING dedupe_key AS key, id::text AS id, status IN ('PENDING', 'FAILED') AS fresh`;

/** What takeBackOnConflictSql returns per row. */
export type WrittenOrTakenBack = { key: string; id: string; fresh: boolean };
