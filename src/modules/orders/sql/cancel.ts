// Cancelled: UNPAID -> CANCELLED with its ORDER_CANCELLED delivery row, by
// the customer (of the order's client only), by the expiry job once the
// window has closed, or by the reconciliation pass for orders overdue past a
// grace. The notice is the order's client's.
//
// One statement each: the cancel and its notice commit together (an outbox:
// no notice without the cancel, no cancel without its notice). Guard:
// `status = 'UNPAID'` judged on the row the UPDATE takes, so a pay racing it
// ends with one winner; the customer's adds `client = <the caller's>`, the
// expiry `expires_at <= now()` (the database clock decides the deadline,
// whatever Redis fired). The status is compared
// through an expression no index holds, so the rows are found by the target
// whatever the statistics say (planned on statistics taken when few orders
// were UNPAID, the status index read every UNPAID order: 160 ms a pass and
// 245 ms a batch of 300 expiries with 172 000 UNPAID). The notice: one per
// order (its dedupe key, ON CONFLICT DO NOTHING). Lock order: the orders,
// then the new notices. The expiry batch locks its UNPAID orders in id
// order first (a CTE, FOR UPDATE), as the extension, the reminder writer
// and other batches do, so two of them sharing orders wait for each other
// rather than deadlock; it answers from the rows as it locked them, so a
// batch that waited for a deadline move judges the moved deadline (not yet
// due: it defers itself to it, even if the move's reschedule missed Redis).
// The pass takes its page with SKIP LOCKED: it never waits for an order's
// lock, so its order cannot close a cycle. The cancelled orders' undelivered
// payment reminders are withdrawn (reminder-withdrawal.ts): the customer's
// cancel and the pass in the same transaction, after it; the expiry in its
// one statement, which leaves an order changed while it waited to the next
// (expireOrders).
import { Prisma } from '../../../generated/prisma/client.js';
import type { Db } from '../../../core/db.js';
import { dedupeKeySql, deliveryInsertSql } from '../../../core/delivery/index.js';
import type { CancelReason, OrderStatus } from './order-row.js';
import { withdrawPaymentRemindersSql, withdrawSettledPaymentRemindersOfSql, withdrawSettledPaymentRemindersSql } from './reminder-withdrawal.js';

const WITHDRAWN_AT_CANCEL = 'order cancelled before its payment reminder was delivered';

const CANCELLED_NOTICE = deliveryInsertSql({
  kind: 'ORDER_CANCELLED',
  from: Prisma.sql`c`,
  dedupeKey: dedupeKeySql.orderCancelled(Prisma.sql`c.id`),
  subject: { column: 'order_id', value: Prisma.sql`c.id` },
  client: Prisma.sql`c.client`,
  payload: Prisma.sql`jsonb_build_object('orderId', c.id, 'customerId', c.customer_id, 'reason', c.cancel_reason::text,
                                         'totalCents', c.total_cents, 'currency', c.currency)`,
});

/** The cancelling CTEs: `c` the orders of `target` it cancelled, `n` their new delivery rows; `before`, CTEs ahead of them. */
function cancelCtes(target: Prisma.Sql, reason: CancelReason, before: Prisma.Sql = Prisma.empty): Prisma.Sql {
  return Prisma.sql`
    WITH ${before} c AS (
      UPDATE orders
         SET status = 'CANCELLED', cancelled_at = now(), cancel_reason = ${reason}::"CancelReason"
       WHERE status::text = 'UNPAID' AND ${target}
      RETURNING id, client, customer_id, total_cents, currency, cancel_reason
    ), n AS (
      ${CANCELLED_NOTICE}
      ON CONFLICT (dedupe_key) DO NOTHING
      RETURNING id, order_id
    )`;
}

type CancelledRow = { id: string; notification_id: string | null };

function cancelSql(target: Prisma.Sql, reason: CancelReason): Prisma.Sql {
  return Prisma.sql`${cancelCtes(target, reason)} SELECT c.id, n.id AS notification_id FROM c LEFT JOIN n ON n.order_id = c.id`;
}

/** The customer's cancel; the new notification's id, or null when nothing changed (not UNPAID, or not the client's). */
export async function cancelOrder(db: Db, client: string, id: string): Promise<{ notificationId: string | null } | null> {
  const target = Prisma.sql`id = ${id}::uuid AND client = ${client}`;
  const [rows] = await db.$transaction([
    db.$queryRaw<CancelledRow[]>(cancelSql(target, 'CUSTOMER')),
    db.$executeRaw(withdrawPaymentRemindersSql(target, WITHDRAWN_AT_CANCEL)),
  ]);
  const r = rows[0];
  return r ? { notificationId: r.notification_id } : null;
}

/** What an expiry did to one order; not_due: still inside its window by the database clock, for `inMs` more (or changed under the expiry's lock in every round: to be taken again in `inMs`). */
export type ExpiryOutcome = { kind: 'cancelled'; notificationId: string | null } | { kind: 'settled' } | { kind: 'not_due'; inMs: number };

/** expireOrders' statement (exported for the test of its plan). */
export function expireManySql(ids: readonly string[]): Prisma.Sql {
  // l: the batch's UNPAID orders locked in id order, as they are once locked
  // (a row changed by a transaction the lock waited for is read as it committed:
  // paid or cancelled meanwhile, it is not in l; moved, l holds its new deadline),
  // with the xmin of that version (v) and the xmin of the version this
  // statement's snapshot holds (seen: the subquery reads by the snapshot, also
  // when the lock rechecks a changed row). Only an order whose two agree may be
  // cancelled here; another changed while the lock waited (a reminder may have
  // been committed: not in this snapshot, the withdrawal w could not reach it).
  const locked = Prisma.sql`l AS (
      SELECT id, expires_at, xmin AS v, (SELECT s.xmin FROM orders s WHERE s.id = orders.id) AS seen FROM orders
       WHERE id = ANY(${[...ids]}::uuid[]) AND status::text = 'UNPAID'
       ORDER BY id
         FOR UPDATE
    ),`;
  return Prisma.sql`
    ${cancelCtes(Prisma.sql`id IN (SELECT id FROM l WHERE seen = v) AND id = ANY(${[...ids]}::uuid[]) AND expires_at <= now()`, 'PAYMENT_TIMEOUT', locked)},
    w AS (${withdrawSettledPaymentRemindersOfSql(Prisma.sql`(SELECT id, NULL::text AS kept_key FROM c) s`, WITHDRAWN_AT_CANCEL)})
    -- An order not in l was settled (paid, cancelled) or is unknown.
    SELECT l.id::text AS id, c.id IS NOT NULL AS cancelled, n.id::text AS notification_id, 'UNPAID' AS status,
           GREATEST(0, ceil(extract(epoch FROM l.expires_at - now()) * 1000))::int AS ms, l.seen IS DISTINCT FROM l.v AS changed
      FROM l LEFT JOIN c ON c.id = l.id LEFT JOIN n ON n.order_id = l.id`;
}

/** How many statements an expiry runs at most (the first, and again at once for orders changed under its lock), before it defers those. */
const CHANGED_ROUNDS = 3;
/** How long such an order is deferred after those rounds (a writer keeps changing it). */
const CHANGED_DEFER_MS = 100;

/**
 * The expiry of many orders; an answer for every id asked: cancelled (with
 * its notification), still inside its window (for how many ms; or changed in
 * every round: in CHANGED_DEFER_MS), or settled (paid, cancelled already, or
 * unknown).
 *
 * One statement cancels and withdraws the payment reminders its snapshot
 * holds, so a reminder is never live once its order's cancel has committed.
 * A reminder committed while the statement waited for an order's lock is not
 * in its snapshot: its writer marks the order row (write-payment-reminders.ts),
 * the statement leaves that order alone (`changed`), and the next statement,
 * with a snapshot taken after that commit, cancels it with its reminder.
 * No transaction is held open. A later statement that fails defers its
 * orders as a writer that keeps changing them does; only the first's failure
 * is thrown (nothing committed).
 */
export async function expireOrders(db: Db, ids: readonly string[]): Promise<Map<string, ExpiryOutcome>> {
  const out = new Map<string, ExpiryOutcome>();
  let todo = ids;
  for (let round = 0; todo.length > 0 && round < CHANGED_ROUNDS; round++) {
    type Row = { id: string; cancelled: boolean; notification_id: string | null; status: OrderStatus; ms: number; changed: boolean };
    let rows: Row[];
    try {
      rows = await db.$queryRaw<Row[]>(expireManySql(todo));
    } catch (err) {
      // A later round's failure must not lose what the first committed (its
      // notices are dispatched by the answer): its orders are deferred below.
      if (round === 0) throw err;
      break;
    }
    const again = new Set<string>();
    for (const r of rows) {
      if (r.cancelled) out.set(r.id, { kind: 'cancelled', notificationId: r.notification_id });
      else if (r.status === 'UNPAID' && r.ms > 0) out.set(r.id, { kind: 'not_due', inMs: r.ms });
      else if (r.changed) again.add(r.id);
      else out.set(r.id, { kind: 'settled' });
    }
    for (const id of todo) if (!out.has(id) && !again.has(id)) out.set(id, { kind: 'settled' });
    todo = [...again];
  }
  for (const id of todo) out.set(id, { kind: 'not_due', inMs: CHANGED_DEFER_MS });
  return out;
}

/** cancelOverdue's statement (exported for the test of its plan): the oldest overdue UNPAID orders, by the status index, skipping locked ones. */
export function cancelOverdueSql(graceSeconds: number, limit: number): Prisma.Sql {
  const target = Prisma.sql`id IN (
    SELECT id FROM orders
     WHERE status = 'UNPAID' AND expires_at < now() - make_interval(secs => ${graceSeconds})
     ORDER BY expires_at LIMIT ${limit} FOR UPDATE SKIP LOCKED)`;
  return cancelSql(target, 'PAYMENT_TIMEOUT');
}

/** Cancels up to `limit` orders unpaid for longer than `graceSeconds` past their deadline; returns their notification ids. */
export async function cancelOverdue(db: Db, graceSeconds: number, limit: number): Promise<{ cancelled: number; notificationIds: string[] }> {
  const rows = await db.$transaction(async (tx) => {
    const cancelled = await tx.$queryRaw<CancelledRow[]>(cancelOverdueSql(graceSeconds, limit));
    if (cancelled.length > 0)
      await tx.$executeRaw(
        withdrawSettledPaymentRemindersSql(
          cancelled.map((r) => r.id),
          WITHDRAWN_AT_CANCEL,
        ),
      );
    return cancelled;
  });
  return { cancelled: rows.length, notificationIds: rows.flatMap((r) => (r.notification_id ? [r.notification_id] : [])) };
}
