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
// delivery job still its own. Lock order: after the caller's subject rows,
// the rows it will take back, in id order, before the insert writes its first
// row (takeBackLockedFirstSql, the insert's `where`): ON CONFLICT alone locks
// each row as the insert's input meets it (its subjects' order), and a
// take-back of two withdrawn SENDING rows deadlocked with the SENT mark of
// both (mark-sent.ts, id order). ON CONFLICT locks a live row it meets even
// to change nothing: the writers leave out the events with a live row by
// their snapshot. A row committed after the snapshot (another writer of the
// same subject, while this one waited for the subject's lock) is seen by
// neither, and ON CONFLICT would lock it outside id order: the orders' writer
// leaves out an order changed since its snapshot; the appointments' writer
// reads the locked appointment's own marks (README.md, Lock order).
// Returns per row written or taken back: its dedupe key, id, and `fresh`
// (PENDING or FAILED now: its delivery must be scheduled afresh, the old job
// may be gone or dead).
import { Prisma } from '../../generated/prisma/client.js';
import { lockedInOrderSql } from './contract.js';
import type { DeliveryInsert } from './write.js';

/** The guard, over row `n`: one lock step and one ON CONFLICT judge the same rows. */
const takable = (n: Prisma.Sql) => Prisma.sql`(${n}.status = 'CANCELLED' OR ${n}.withdrawn_at IS NOT NULL)`;

/**
 * SQL for the `where` of the insert `write` (its `from` and `dedupeKey`), a
 * condition always true: the rows the take-back will change, of the keys the
 * insert writes, locked in id order (contract.ts) before it writes its first
 * row (an InitPlan: evaluated whole, once, where first needed).
 */
export const takeBackLockedFirstSql = (write: Pick<DeliveryInsert, 'from' | 'dedupeKey'>): Prisma.Sql =>
  Prisma.sql`cardinality(${lockedInOrderSql((l) => Prisma.sql`${l}.dedupe_key = ANY(ARRAY(SELECT ${write.dedupeKey} FROM ${write.from})) AND ${takable(l)}`)}) >= 0`;

export const takeBackOnConflictSql = Prisma.sql`
  ON CONFLICT (dedupe_key) DO UPDATE
     SET status = (CASE WHEN notifications.status <> 'CANCELLED' THEN notifications.status
                        WHEN notifications.refused THEN 'FAILED' ELSE 'PENDING' END)::"NotificationStatus",
         attempts = CASE WHEN notifications.status = 'CANCELLED' AND NOT notifications.refused THEN 0 ELSE notifications.attempts END,
         last_error = CASE WHEN notifications.status = 'CANCELLED' AND NOT notifications.refused THEN NULL ELSE notifications.last_error END,
         withdrawn_at = NULL
   WHERE ${takable(Prisma.sql`notifications`)}
  RETURNING dedupe_key AS key, id::text AS id, status IN ('PENDING', 'FAILED') AS fresh`;

/** What takeBackOnConflictSql returns per row. */
export type WrittenOrTakenBack = { key: string; id: string; fresh: boolean };
