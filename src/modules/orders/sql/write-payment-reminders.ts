// Reminded: the payment reminder (ORDER_PAYMENT_REMINDER) of each order still
// UNPAID whose reminder time has come and whose deadline has not, written
// through the delivery room's write fragment, one per deadline; a reminder of
// that deadline withdrawn earlier (the deadline moved away and back to the
// same instant) is taken back (core/delivery/take-back.ts).
//
// One statement for the reminder jobs of a batch or the pass's overdue page,
// each order judged on its own row as the statement locks it (database
// clock): UNPAID, `payment_remind_at <= now() < expires_at`. The reminder is
// written for the deadline the row holds now, whatever deadline its job was
// planned for: a job planned for an older deadline finds the new one's
// reminder time not yet come (it comes back then) or, moved earlier, writes
// the new deadline's reminder. One per deadline (the dedupe key holds
// expires_at: a moved deadline may remind again; the same deadline never twice).
// An order whose deadline has a live reminder (by this statement's snapshot)
// inserts nothing: ON CONFLICT would lock that row even to change nothing
// while the statement goes on locking orders, and deliveries lock such rows
// in their own order. An order changed while the statement waited for its
// lock and still due (its version is not the snapshot's: another writer's
// reminder, which the snapshot cannot see, or a deadline move) is not
// written for either: it is answered not due, to be looked at again in
// 100 ms with a fresh snapshot (as the expiry does, cancel.ts). A snapshot
// older than a withdrawal it waited for sees the row live and writes
// nothing; the job the move rescheduled runs again after it, and the
// reconciliation pass counts only live rows.
// Lock order: the orders in id order (FOR UPDATE: a pay or cancel racing it
// either commits first, and the order is skipped, or waits, and its own
// withdrawal then sees the reminder), then the reminders it takes back, in id
// order, before the insert writes its first row (take-back.ts), then the new
// ones.
// Each order it writes for is marked by a no-op update (`mark`): the row's
// new version tells an expiry that waited for its lock that a reminder
// committed after the expiry's snapshot (cancel.ts, expireOrders).
// Returns, for every id asked: the reminder's id when written or taken back
// for a delivery to schedule (`fresh`), or when found live and PENDING for
// the current deadline (a rerun of a job that died before its dispatch), or
// how long until its time (still UNPAID, not yet due, by the snapshot; or
// changed under its lock: 100 ms), or neither.
import { Prisma } from '../../../generated/prisma/client.js';
import type { Db } from '../../../core/db.js';
import {
  type WrittenOrTakenBack,
  dedupeKeySql,
  deliveryInsertSql,
  liveSql,
  takeBackLockedFirstSql,
  takeBackOnConflictSql,
} from '../../../core/delivery/index.js';

/** An order changed while the statement waited for its lock comes back this soon (its job looks again). */
const CHANGED_DEFER_MS = 100;

/** The reminder's dedupe key of the deadline order `o` holds. */
const keyOf = (o: Prisma.Sql) => dedupeKeySql.orderPaymentReminder(Prisma.sql`${o}.id`, Prisma.sql`${o}.expires_at`);

/** The reminders to write: one per order of `w`, its key computed once there. */
const WRITTEN = { from: Prisma.sql`w o`, dedupeKey: Prisma.sql`o.key` };

const REMINDER = deliveryInsertSql({
  kind: 'ORDER_PAYMENT_REMINDER',
  ...WRITTEN,
  where: takeBackLockedFirstSql(WRITTEN),
  subject: { column: 'order_id', value: Prisma.sql`o.id` },
  client: Prisma.sql`o.client`,
  payload: Prisma.sql`jsonb_build_object('orderId', o.id, 'customerId', o.customer_id, 'totalCents', o.total_cents, 'currency', o.currency,
                                         'expiresAt', to_char(o.expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))`,
});

/**
 * What the reminder job of one order found: written; written before and still
 * PENDING (its job run again after dying between the write and the dispatch:
 * to be handed over again); not yet due (for `inMs`; or changed while the
 * statement waited for its lock: to be looked at again); or nothing to write
 * (settled, none, past its deadline, on its way or delivered already).
 */
export type ReminderOutcome =
  { kind: 'written'; notificationId: string } | { kind: 'pending'; notificationId: string } | { kind: 'not_due'; inMs: number } | { kind: 'none' };

export async function writePaymentReminders(db: Db, ids: readonly string[]): Promise<Map<string, ReminderOutcome>> {
  if (ids.length === 0) return new Map();
  const rows = await db.$queryRaw<
    { id: string; notification_id: WrittenOrTakenBack['id'] | null; fresh: boolean | null; pending_id: string | null; changed: boolean; ms: number | null }[]
  >`
    WITH due AS (
      -- Through an expression no index holds: found by their ids whatever the statistics say.
      SELECT id, client, customer_id, total_cents, currency, expires_at, xmin AS v, (SELECT s.xmin FROM orders s WHERE s.id = orders.id) AS seen FROM orders
       WHERE id = ANY(${[...ids]}::uuid[]) AND status::text = 'UNPAID'
         AND payment_remind_at + interval '0' <= now() AND expires_at > now()
       ORDER BY id
         FOR UPDATE
    ), w AS (
      SELECT d.*, k.key FROM due d CROSS JOIN LATERAL (SELECT ${keyOf(Prisma.sql`d`)} AS key) k
       WHERE d.seen = d.v AND NOT EXISTS (SELECT 1 FROM notifications r WHERE r.dedupe_key = k.key AND ${liveSql(Prisma.sql`r`)})
    ), n AS (
      ${REMINDER}
      ${takeBackOnConflictSql}
    ), mark AS (
      UPDATE orders o SET payment_remind_at = o.payment_remind_at FROM w WHERE o.id = w.id
    )
    SELECT x.id::text AS id, n.id AS notification_id, n.fresh, p.id::text AS pending_id, d.seen IS DISTINCT FROM d.v AS changed,
           CASE WHEN x.status = 'UNPAID' AND x.payment_remind_at > now()
                THEN ceil(extract(epoch FROM x.payment_remind_at - now()) * 1000)::int END AS ms
      FROM orders x LEFT JOIN w ON w.id = x.id LEFT JOIN n ON n.key = w.key
      LEFT JOIN due d ON d.id = x.id AND w.id IS NULL
      LEFT JOIN notifications p ON p.dedupe_key = ${keyOf(Prisma.sql`d`)} AND p.status::text = 'PENDING' AND p.withdrawn_at IS NULL
     WHERE x.id = ANY(${[...ids]}::uuid[])`;
  const out = new Map<string, ReminderOutcome>();
  for (const r of rows) {
    // Taken back still SENDING (its withdrawal lifted): its running delivery is its own, nothing to schedule.
    if (r.notification_id && r.fresh) out.set(r.id, { kind: 'written', notificationId: r.notification_id });
    else if (r.changed) out.set(r.id, { kind: 'not_due', inMs: CHANGED_DEFER_MS });
    else if (r.pending_id) out.set(r.id, { kind: 'pending', notificationId: r.pending_id });
    else if (r.ms !== null && r.ms > 0) out.set(r.id, { kind: 'not_due', inMs: r.ms });
    else out.set(r.id, { kind: 'none' });
  }
  for (const id of ids) if (!out.has(id)) out.set(id, { kind: 'none' });
  return out;
}
