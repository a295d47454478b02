// The payment reminders an order no longer needs: the delivery room's
// withdrawal (core/delivery/withdraw.ts) of the undelivered
// ORDER_PAYMENT_REMINDER rows of an order that is no longer UNPAID (paid, or
// cancelled by the customer, the expiry or the reconciliation pass), or, of
// an UNPAID one, those written for a deadline it no longer has (moved by the
// client or extended by an operator): a reminder names its deadline.
//
// Its own statement, run in the changing statement's transaction after it: a
// reminder its writer committed while the change waited for the order's lock
// is seen here (a CTE of the changing statement would miss it, and the nudge
// would go out for a paid order, or with a deadline the order no longer has).
// The expiry alone withdraws in a CTE of its one statement: it leaves an
// order changed under its lock to its next statement (cancel.ts).
// Guard: the orders of `target`; their rows PENDING, FAILED or SENDING, not
// withdrawn, other than the current deadline's of an UNPAID order
// (withdraw.ts: a running call decides its own end). Lock order: the orders
// (locked by the change before it), then their delivery rows. Returns the
// count withdrawn.
import { Prisma } from '../../../generated/prisma/client.js';
import { dedupeKeySql, withdrawSql } from '../../../core/delivery/index.js';

/** `target`: a condition over the orders table's columns naming the changed orders (by id: the primary key finds them). */
export function withdrawPaymentRemindersSql(target: Prisma.Sql, reason: string): Prisma.Sql {
  const current = dedupeKeySql.orderPaymentReminder(Prisma.sql`id`, Prisma.sql`expires_at`);
  return withdrawSql({
    kind: 'ORDER_PAYMENT_REMINDER',
    subject: 'order_id',
    from: Prisma.sql`(SELECT id, CASE WHEN status::text = 'UNPAID' THEN ${current} END AS kept_key FROM orders WHERE ${target}) s`,
    reason,
  });
}

/**
 * The withdrawal of every undelivered payment reminder of the orders in
 * `settled`, orders no longer UNPAID (no deadline kept): a FROM item aliased
 * `s` with columns `id` and `kept_key` (NULL). By the live reminders' partial
 * index, no order read.
 */
export function withdrawSettledPaymentRemindersOfSql(settled: Prisma.Sql, reason: string): Prisma.Sql {
  return withdrawSql({ kind: 'ORDER_PAYMENT_REMINDER', subject: 'order_id', from: settled, reason });
}

/** The same for orders named by id. */
export function withdrawSettledPaymentRemindersSql(ids: readonly string[], reason: string): Prisma.Sql {
  return withdrawSettledPaymentRemindersOfSql(Prisma.sql`(SELECT unnest(${[...ids]}::uuid[]) AS id, NULL::text AS kept_key) s`, reason);
}
