// Reminded: the payment reminder (ORDER_PAYMENT_REMINDER) of each order still
// UNPAID whose reminder time has come and whose deadline has not, written
// through the delivery room's write fragment, one per deadline.
//
// One statement for the reminder jobs of a batch or the pass's overdue page,
// each order judged on its own row as the statement locks it (database
// clock): UNPAID, `payment_remind_at <= now() < expires_at`. The reminder is
// written for the deadline the row holds now, whatever deadline its job was
// planned for: a job planned for an older deadline finds the new one's
// reminder time not yet come (it comes back then) or, moved earlier, writes
// the new deadline's reminder. One per deadline (the dedupe key holds
// expires_at: a moved deadline may remind again; the same deadline never twice).
// Lock order: the orders in id order (FOR UPDATE: a pay or cancel racing it
// either commits first, and the order is skipped, or waits, and its own
// withdrawal then sees the reminder), then the new reminder rows.
// Returns, for every id asked: the new reminder's id, or how long until its
// time (still UNPAID, not yet due, by the snapshot), or neither.
import { Prisma } from '../../../generated/prisma/client.js';
import type { Db } from '../../../core/db.js';
import { dedupeKeySql, deliveryInsertSql } from '../../../core/delivery/index.js';

const REMINDER = deliveryInsertSql({
  kind: 'ORDER_PAYMENT_REMINDER',
  from: Prisma.sql`due o`,
  dedupeKey: dedupeKeySql.orderPaymentReminder(Prisma.sql`o.id`, Prisma.sql`o.expires_at`),
  subject: { column: 'order_id', value: Prisma.sql`o.id` },
  client: Prisma.sql`o.client`,
  payload: Prisma.sql`jsonb_build_object('orderId', o.id, 'customerId', o.customer_id, 'totalCents', o.total_cents, 'currency', o.currency,
                                         'expiresAt', to_char(o.expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))`,
});

/** What the reminder job of one order found: written, not yet due (for `inMs`), or nothing to write (settled, none, past its deadline, written already). */
export type ReminderOutcome = { kind: 'written'; notificationId: string } | { kind: 'not_due'; inMs: number } | { kind: 'none' };

export async function writePaymentReminders(db: Db, ids: readonly string[]): Promise<Map<string, ReminderOutcome>> {
  if (ids.length === 0) return new Map();
  const rows = await db.$queryRaw<{ id: string; notification_id: string | null; ms: number | null }[]>`
    WITH due AS (
      -- Through an expression no index holds: found by their ids whatever the statistics say.
      SELECT id, client, customer_id, total_cents, currency, expires_at FROM orders
       WHERE id = ANY(${[...ids]}::uuid[]) AND status::text = 'UNPAID'
         AND payment_remind_at + interval '0' <= now() AND expires_at > now()
       ORDER BY id
         FOR UPDATE
    ), n AS (
      ${REMINDER}
      ON CONFLICT (dedupe_key) DO NOTHING
      RETURNING id, order_id
    )
    SELECT x.id::text AS id, n.id::text AS notification_id,
           CASE WHEN x.status = 'UNPAID' AND x.payment_remind_at > now()
                THEN ceil(extract(epoch FROM x.payment_remind_at - now()) * 1000)::int END AS ms
      FROM orders x LEFT JOIN n ON n.order_id = x.id
     WHERE x.id = ANY(${[...ids]}::uuid[])`;
  const out = new Map<string, ReminderOutcome>();
  for (const r of rows) {
    if (r.notification_id) out.set(r.id, { kind: 'written', notificationId: r.notification_id });
    else if (r.ms !== null && r.ms > 0) out.set(r.id, { kind: 'not_due', inMs: r.ms });
    else out.set(r.id, { kind: 'none' });
  }
  for (const id of ids) if (!out.has(id)) out.set(id, { kind: 'none' });
  return out;
}
