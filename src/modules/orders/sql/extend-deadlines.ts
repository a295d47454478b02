// Deadlines extended by an operator: every UNPAID order whose deadline lies in
// [from, to) (of one client, or of all) gets it pushed by some seconds, its
// reminder's time with it: the window given back to the orders of an
// incident (the payment provider down).
//
// One set-based statement: each order is judged on its row as the statement
// locks it, so an order paid or cancelled meanwhile is left alone; an order
// already past its deadline but not yet cancelled (its expiry job may be
// running right now) is extended if this statement locks it first, and
// cancelled if the expiry's statement does (both are conditional on UNPAID:
// whichever commits first wins, the other finds it settled or not yet due).
// Not bound by ORDER_MAX_WINDOW_SECONDS: the operator's word.
// Guard: `status = 'UNPAID'` and the deadline in the range, re-checked on the
// row as locked. Lock order: the orders by id (FOR UPDATE), so two extends, or
// an extend and a move, wait for each other rather than deadlock; an expiry
// batch locking in another order may still deadlock with it: PostgreSQL
// aborts one, and the caller retries an aborted extend, which changed nothing.
// In the same transaction, after it, the extended orders' undelivered
// reminders of their old deadlines are withdrawn (reminder-withdrawal.ts).
// Returns each extended order's id, new deadline and reminder time.
import { Prisma } from '../../../generated/prisma/client.js';
import type { Db } from '../../../core/db.js';
import { remindAtSql } from './order-row.js';
import { withdrawPaymentRemindersSql } from './reminder-withdrawal.js';

export type Extended = { id: string; expiresAt: Date; paymentRemindAt: Date | null };

export async function extendDeadlines(db: Db, from: Date, to: Date, bySeconds: number, client: string | null): Promise<Extended[]> {
  const at = Prisma.sql`(o.expires_at + make_interval(secs => ${bySeconds}::int))`;
  return db.$transaction(
    async (tx) => {
      const extended = await tx.$queryRaw<Extended[]>`
    WITH t AS (
      SELECT id FROM orders
       WHERE status = 'UNPAID' AND expires_at >= ${from}::timestamptz AND expires_at < ${to}::timestamptz
         AND (${client}::text IS NULL OR client = ${client}::text)
       ORDER BY id
         FOR UPDATE
    ), x AS (
      UPDATE orders o
         SET expires_at = ${at}, payment_remind_at = ${remindAtSql(at, Prisma.sql`o.payment_reminder_before_seconds`, Prisma.sql`o.created_at`)}
        FROM t
       WHERE o.id = t.id AND o.status = 'UNPAID'
      RETURNING o.id, o.expires_at, o.payment_remind_at
    )
    SELECT id::text AS id, expires_at AS "expiresAt", payment_remind_at AS "paymentRemindAt" FROM x`;
      if (extended.length > 0)
        await tx.$executeRaw(
          withdrawPaymentRemindersSql(
            Prisma.sql`id = ANY(${extended.map((o) => o.id)}::uuid[])`,
            'order deadline extended before its payment reminder was delivered',
          ),
        );
      return extended;
      // A range of an incident may hold many orders: longer than an interactive transaction is given by default.
    },
    { timeout: 60_000 },
  );
}
