// Withdrawn: the subject gave up what its undelivered rows announce (a
// reminder's appointment cancelled, or moved to another slot), so no call of
// them may start from now on.
//
// One statement over the subject's rows, run in the transaction of the
// business change and after it: in READ COMMITTED a statement sees what
// committed before it started, so a writer of a row that held the subject's
// lock when the change started (and commits while the change waits for it) is
// seen here; a CTE of the changing statement would miss that row and leave it
// to be delivered for something given up. Writers coming after the change
// wait for the subject's lock, then find it gone. A CTE is enough only for a
// change that leaves alone the subjects a writer touched while it waited (the
// orders' expiry: the writer marks the order, sql/cancel.ts).
//
// Guard: rows of `kind` of the subjects in `from`, not withdrawn yet, still
// PENDING, FAILED or SENDING, other than the one `from` says is still held.
// - PENDING, and FAILED given up -> CANCELLED with `reason` (a FAILED one
//   CANCELLED, so the event held again starts afresh: take-back.ts);
// - SENDING: a call is running and cannot be called back: only marked
//   withdrawn; its outcome decides (settle: SENT if the receiver took it,
//   CANCELLED if the call failed);
// - refused (FAILED by the receiver's refusal): stays FAILED, marked
//   withdrawn: holding the event again must not call it again, only an
//   operator's redrive does.
// The subjects' rows are found by the subject's index from the subjects'
// ids (`= ANY(ARRAY(...))`, an index condition): a join alone may be planned
// (tables never analyzed, or a CTE estimated at one row) as a scan of every
// live row against each subject, which costs with the backlog, not the batch.
// Lock order: the subject row (the caller's change), then its delivery rows
// in id order (contract.ts).
// Returns the number of rows withdrawn.
import { Prisma } from '../../generated/prisma/client.js';
import { type DeliverySubject, type NotificationKind, idsLockedInOrderSql } from './contract.js';

export type Withdrawal = {
  kind: NotificationKind;
  subject: DeliverySubject;
  /**
   * The subjects, as a FROM item aliased `s` with columns `id` (the subject)
   * and `kept_key` (the dedupe key of the one row still held, NULL when none is),
   * or with `keptMany`, `kept_keys` (text[]: the rows still held, NULL or empty when none is).
   */
  from: Prisma.Sql;
  keptMany?: boolean;
  reason: string;
};

export function withdrawSql(o: Withdrawal): Prisma.Sql {
  const subject = Prisma.raw(o.subject);
  const subjects = Prisma.sql`ANY(ARRAY(SELECT s.id FROM ${o.from}))`;
  // The guard, over row `n` of subject `s`.
  const withdrawable = (n: Prisma.Sql) => Prisma.sql`${n}.${subject} = s.id AND ${n}.kind = ${o.kind}::"NotificationKind"
      AND ${n}.status IN ('PENDING', 'FAILED', 'SENDING') AND ${n}.withdrawn_at IS NULL
      AND ${o.keptMany ? Prisma.sql`${n}.dedupe_key <> ALL(COALESCE(s.kept_keys, ARRAY[]::text[]))` : Prisma.sql`(s.kept_key IS NULL OR ${n}.dedupe_key <> s.kept_key)`}`;
  return Prisma.sql`UPDATE notifications n
      SET status = (CASE WHEN n.status = 'SENDING' OR n.refused THEN n.status ELSE 'CANCELLED' END)::"NotificationStatus",
          last_error = CASE WHEN n.status = 'SENDING' OR n.refused THEN n.last_error ELSE ${o.reason} END,
          withdrawn_at = now()
     FROM ${o.from}
    WHERE n.${subject} = ${subjects}
      AND n.id ${idsLockedInOrderSql((l) => Prisma.sql`${l}.${subject} = ${subjects} AND ${withdrawable(l)}`, Prisma.sql`, ${o.from}`)}
      AND ${withdrawable(Prisma.sql`n`)}`;
}
