// Deadlines extended by an operator: every UNPAID order whose deadline lies in
// [from, to) (of one client, or of all) gets it pushed by some seconds, its
// reminder's time with it: the window given back to the orders of an
// incident (the payment provider down).
//
// One set-based statement per page of up to `limit` orders, each page its own
// transaction, so no call holds more than a page's locks, nor an incident of
// millions in one transaction. Pages go from the latest deadline down
// (keyset on expires_at, id): an extended order moves later, behind the
// cursor, so a later page of the same call never extends it again. Each order
// is judged on its row as the statement locks it, so an order paid or
// cancelled meanwhile is left alone; an order already past its deadline but
// not yet cancelled (its expiry job may be running right now) is extended if
// this statement locks it first, and cancelled if the expiry's statement does
// (both are conditional on UNPAID: whichever commits first wins, the other
// finds it settled or not yet due).
// Not bound by ORDER_MAX_WINDOW_SECONDS: the operator's word.
// Guard: `status = 'UNPAID'` and the deadline in the range, re-checked on the
// row as locked. Lock order: the page's orders by id (FOR UPDATE), as a move,
// the expiry batch and the reminder writer lock theirs, so they wait for
// each other rather than deadlock. In the same transaction, after it, the
// extended orders' undelivered reminders of their old deadlines are
// withdrawn (reminder-withdrawal.ts).
// Returns each extended order's id, new deadline and reminder time, and the
// cursor of the next page (null: the range is done).
import { Prisma } from '../../../generated/prisma/client.js';
import type { Db } from '../../../core/db.js';
import { remindAtSql } from './order-row.js';
import { withdrawPaymentRemindersSql } from './reminder-withdrawal.js';

export type Extended = { id: string; expiresAt: Date; paymentRemindAt: Date | null };
/** Where the next page starts: below this deadline and id. */
export type ExtendCursor = { expiresAt: Date; id: string };
export type ExtendRange = { from: Date; to: Date; bySeconds: number; client: string | null };

type PageRow = { last_at: Date | null; last_id: string | null; rows: number; extended: { id: string; expiresAt: string; paymentRemindAt: string | null }[] };

export async function extendDeadlinesPage(
  db: Db,
  r: ExtendRange,
  after: ExtendCursor | null,
  limit: number,
): Promise<{ extended: Extended[]; next: ExtendCursor | null }> {
  const at = Prisma.sql`(o.expires_at + make_interval(secs => ${r.bySeconds}::int))`;
  const cursor = after ? Prisma.sql`AND (expires_at, id) < (${after.expiresAt}::timestamptz, ${after.id}::uuid)` : Prisma.empty;
  const inRange = Prisma.sql`status = 'UNPAID' AND expires_at >= ${r.from}::timestamptz AND expires_at < ${r.to}::timestamptz
         AND (${r.client}::text IS NULL OR client = ${r.client}::text)`;
  return db.$transaction(async (tx) => {
    const [page] = await tx.$queryRaw<PageRow[]>`
    WITH p AS (
      -- The page, by the statement's snapshot, from the latest deadline down.
      SELECT id, expires_at FROM orders WHERE ${inRange} ${cursor}
       ORDER BY expires_at DESC, id DESC
       LIMIT ${limit}
    ), t AS (
      SELECT id FROM orders WHERE id IN (SELECT id FROM p) AND ${inRange}
       ORDER BY id
         FOR UPDATE
    ), x AS (
      UPDATE orders o
         SET expires_at = ${at}, payment_remind_at = ${remindAtSql(at, Prisma.sql`o.payment_reminder_before_seconds`, Prisma.sql`o.created_at`)}
        FROM t
       WHERE o.id = t.id AND o.status = 'UNPAID'
      RETURNING o.id, o.expires_at, o.payment_remind_at
    ), last AS (
      SELECT expires_at, id FROM p ORDER BY expires_at, id LIMIT 1
    )
    SELECT (SELECT expires_at FROM last) AS last_at, (SELECT id::text FROM last) AS last_id, (SELECT count(*)::int FROM p) AS rows,
           (SELECT coalesce(json_agg(json_build_object('id', x.id, 'expiresAt', x.expires_at, 'paymentRemindAt', x.payment_remind_at)), '[]'::json)
              FROM x) AS extended`;
    const extended = (page?.extended ?? []).map((e) => ({
      id: e.id,
      expiresAt: new Date(e.expiresAt),
      paymentRemindAt: e.paymentRemindAt === null ? null : new Date(e.paymentRemindAt),
    }));
    if (extended.length > 0)
      await tx.$executeRaw(
        withdrawPaymentRemindersSql(
          Prisma.sql`id = ANY(${extended.map((o) => o.id)}::uuid[])`,
          'order deadline extended before its payment reminder was delivered',
        ),
      );
    const full = page !== undefined && page.rows === limit && page.last_at !== null && page.last_id !== null;
    return { extended, next: full ? { expiresAt: page.last_at as Date, id: page.last_id as string } : null };
  });
}
