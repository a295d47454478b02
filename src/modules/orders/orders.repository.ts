// SQL of the orders domain. Every state change is one conditional statement
// judged by the database clock (now()); a count of 0 means "already settled".
import { Prisma } from '../../generated/prisma/client.js';
import type { Db } from '../../core/db.js';
import { dedupeKeySql, deliveriesDeleteSql, deliveriesSettledSql, deliveryInsertSql } from '../../core/delivery/index.js';
import { type PurgeStatement, purgeOf } from '../../core/retention.js';

export type OrderStatus = 'UNPAID' | 'PAID' | 'CANCELLED';

/** Retention's statement: settled orders, by creation (orders_created_at_idx), with their notifications (their items by cascade). */
const PURGE_ORDERS: PurgeStatement = {
  table: 'orders',
  key: 'created_at',
  terminal: (cutoff) =>
    Prisma.sql`t.status <> 'UNPAID' AND coalesce(t.paid_at, t.cancelled_at) < ${cutoff} AND ${deliveriesSettledSql('order_id', Prisma.sql`t.id`, cutoff)}`,
  alsoDelete: [deliveriesDeleteSql('order_id', Prisma.sql`c`)],
};
export type CancelReason = 'PAYMENT_TIMEOUT' | 'CUSTOMER';

export type OrderItemRow = { sku: string; quantity: number; unitPriceCents: number };
export type OrderRow = {
  id: string;
  customerId: string;
  status: OrderStatus;
  currency: string;
  totalCents: number;
  createdAt: Date;
  expiresAt: Date;
  paidAt: Date | null;
  paymentRef: string | null;
  cancelledAt: Date | null;
  cancelReason: CancelReason | null;
  items: OrderItemRow[];
};

export type NewOrder = {
  id: string;
  customerId: string;
  currency: string;
  totalCents: number;
  timeoutSeconds: number;
  idempotencyKey: string | null;
  requestHash: string | null;
  items: OrderItemRow[];
};

type CancelledRow = { id: string; notification_id: string | null };

/** What an expiry did to one order; not_due: still inside its window by the database clock, for `inMs` more. */
export type ExpiryOutcome = { kind: 'cancelled'; notificationId: string | null } | { kind: 'settled' } | { kind: 'not_due'; inMs: number };

type RawOrder = {
  id: string;
  customer_id: string;
  status: OrderStatus;
  currency: string;
  total_cents: bigint | number;
  created_at: Date;
  expires_at: Date;
  paid_at: Date | null;
  payment_ref: string | null;
  cancelled_at: Date | null;
  cancel_reason: CancelReason | null;
  request_hash: string | null;
  items: OrderItemRow[];
};

/**
 * An order with its items in one query (no second round trip for the items).
 * `from` names the rows as `o`: the table with a WHERE, or a CTE.
 */
function orderSelect(from: Prisma.Sql): Prisma.Sql {
  return Prisma.sql`
    SELECT o.id::text AS id, o.customer_id, o.status::text AS status, o.currency, o.total_cents, o.created_at,
           o.expires_at, o.paid_at, o.payment_ref, o.cancelled_at, o.cancel_reason::text AS cancel_reason, o.request_hash,
           (SELECT coalesce(json_agg(json_build_object('sku', i.sku, 'quantity', i.quantity, 'unitPriceCents', i.unit_price_cents)
                                     ORDER BY i.position), '[]'::json)
              FROM order_items i WHERE i.order_id = o.id) AS items
      FROM ${from}`;
}

function toRow(o: RawOrder): OrderRow {
  return {
    id: o.id,
    customerId: o.customer_id,
    status: o.status,
    currency: o.currency,
    totalCents: Number(o.total_cents),
    createdAt: o.created_at,
    expiresAt: o.expires_at,
    paidAt: o.paid_at,
    paymentRef: o.payment_ref,
    cancelledAt: o.cancelled_at,
    cancelReason: o.cancel_reason,
    items: o.items,
  };
}

/** The cancelling statement, shared by the expiry handler, the customer and the reconciliation pass. */
const CANCELLED_NOTICE = deliveryInsertSql({
  kind: 'ORDER_CANCELLED',
  from: Prisma.sql`c`,
  dedupeKey: dedupeKeySql.orderCancelled(Prisma.sql`c.id`),
  subject: { column: 'order_id', value: Prisma.sql`c.id` },
  payload: Prisma.sql`jsonb_build_object('orderId', c.id, 'customerId', c.customer_id, 'reason', c.cancel_reason::text,
                                         'totalCents', c.total_cents, 'currency', c.currency)`,
});

/**
 * The cancelling CTEs: `c` the orders it cancelled, `n` their new outbox rows.
 * `target` names the orders (ids, or a subquery); the status is compared
 * through an expression no index holds, so the rows are found by `target`
 * whatever the statistics say. Planned on statistics taken when few orders
 * were UNPAID (a flash sale's burst before autoanalyze), `status = 'UNPAID'`
 * led the planner to read every UNPAID order through the status index for
 * each statement: 160 ms a reconciliation pass and 245 ms a batch of 300
 * expiries with 172 000 orders UNPAID (bench:history's kept database).
 */
function cancelCtes(target: Prisma.Sql, reason: CancelReason): Prisma.Sql {
  return Prisma.sql`
    WITH c AS (
      UPDATE orders
         SET status = 'CANCELLED', cancelled_at = now(), cancel_reason = ${reason}::"CancelReason"
       WHERE status::text = 'UNPAID' AND ${target}
      RETURNING id, customer_id, total_cents, currency, cancel_reason
    ), n AS (
      ${CANCELLED_NOTICE}
      ON CONFLICT (dedupe_key) DO NOTHING
      RETURNING id, order_id
    )`;
}

function cancelSql(target: Prisma.Sql, reason: CancelReason): Prisma.Sql {
  return Prisma.sql`${cancelCtes(target, reason)} SELECT c.id, n.id AS notification_id FROM c LEFT JOIN n ON n.order_id = c.id`;
}

/** expireMany's statement (exported for the test of its plan). */
export function expireManySql(ids: readonly string[]): Prisma.Sql {
  return Prisma.sql`
    ${cancelCtes(Prisma.sql`id = ANY(${[...ids]}::uuid[]) AND expires_at <= now()`, 'PAYMENT_TIMEOUT')}
    -- o is the statement's snapshot, before c: a row c did not change that
    -- the snapshot shows UNPAID past its deadline was changed by a
    -- concurrent transaction (paid or cancelled) after the snapshot.
    SELECT o.id::text AS id, c.id IS NOT NULL AS cancelled, n.id::text AS notification_id, o.status::text AS status,
           GREATEST(0, ceil(extract(epoch FROM o.expires_at - now()) * 1000))::int AS ms
      FROM orders o LEFT JOIN c ON c.id = o.id LEFT JOIN n ON n.order_id = o.id
     WHERE o.id = ANY(${[...ids]}::uuid[])`;
}

/** cancelOverdue's statement (exported for the test of its plan): the oldest overdue UNPAID orders, by the status index. */
export function cancelOverdueSql(graceSeconds: number, limit: number): Prisma.Sql {
  const target = Prisma.sql`id IN (
    SELECT id FROM orders
     WHERE status = 'UNPAID' AND expires_at < now() - make_interval(secs => ${graceSeconds})
     ORDER BY expires_at LIMIT ${limit} FOR UPDATE SKIP LOCKED)`;
  return cancelSql(target, 'PAYMENT_TIMEOUT');
}

export function createOrdersRepository(db: Db) {
  return {
    /**
     * Inserts orders and their items in one statement (one round trip, atomic:
     * all or none); created_at and expires_at come from the database clock.
     * Answers in input order.
     */
    async insertMany(orders: readonly NewOrder[]): Promise<OrderRow[]> {
      const items = orders.flatMap((o) => o.items.map((it, position) => ({ orderId: o.id, position, ...it })));
      const rows = await db.$queryRaw<{ id: string; created_at: Date; expires_at: Date }[]>`
        WITH o AS (
          INSERT INTO orders (id, customer_id, currency, total_cents, created_at, expires_at, idempotency_key, request_hash)
          SELECT t.id, t.customer_id, t.currency, t.total_cents, now(), now() + make_interval(secs => t.timeout_s), t.idem_key, t.req_hash
            FROM unnest(${orders.map((o) => o.id)}::uuid[], ${orders.map((o) => o.customerId)}::text[],
                        ${orders.map((o) => o.currency)}::text[], ${orders.map((o) => o.totalCents)}::bigint[],
                        ${orders.map((o) => o.timeoutSeconds)}::int[], ${orders.map((o) => o.idempotencyKey)}::text[],
                        ${orders.map((o) => o.requestHash)}::text[])
                 AS t(id, customer_id, currency, total_cents, timeout_s, idem_key, req_hash)
          RETURNING id, created_at, expires_at
        ), i AS (
          INSERT INTO order_items (order_id, position, sku, quantity, unit_price_cents)
          SELECT o.id, t.position, t.sku, t.quantity, t.price
            FROM unnest(${items.map((i) => i.orderId)}::uuid[], ${items.map((i) => i.position)}::int[],
                        ${items.map((i) => i.sku)}::text[], ${items.map((i) => i.quantity)}::int[],
                        ${items.map((i) => i.unitPriceCents)}::int[]) AS t(order_id, position, sku, quantity, price)
            JOIN o ON o.id = t.order_id
        )
        SELECT id::text AS id, created_at, expires_at FROM o`;
      const times = new Map(rows.map((r) => [r.id, r]));
      return orders.map((o) => {
        const r = times.get(o.id);
        if (!r) throw new Error(`order ${o.id} was not inserted`);
        return {
          id: o.id,
          customerId: o.customerId,
          status: 'UNPAID',
          currency: o.currency,
          totalCents: o.totalCents,
          createdAt: r.created_at,
          expiresAt: r.expires_at,
          paidAt: null,
          paymentRef: null,
          cancelledAt: null,
          cancelReason: null,
          items: o.items.map((i) => ({ sku: i.sku, quantity: i.quantity, unitPriceCents: i.unitPriceCents })),
        };
      });
    },

    async find(id: string): Promise<OrderRow | null> {
      const [o] = await db.$queryRaw<RawOrder[]>(orderSelect(Prisma.sql`orders o WHERE o.id = ${id}::uuid`));
      return o ? toRow(o) : null;
    },

    async findByIdempotencyKey(key: string): Promise<{ order: OrderRow; requestHash: string | null } | null> {
      const [o] = await db.$queryRaw<RawOrder[]>(orderSelect(Prisma.sql`orders o WHERE o.idempotency_key = ${key}`));
      return o ? { order: toRow(o), requestHash: o.request_hash } : null;
    },

    /** UNPAID and inside its window by the database clock -> PAID; the paid order, or null when nothing changed. */
    async pay(id: string, paymentRef: string | null): Promise<OrderRow | null> {
      const [o] = await db.$queryRaw<RawOrder[]>`
        WITH paid AS (
          UPDATE orders SET status = 'PAID', paid_at = now(), payment_ref = ${paymentRef}
           WHERE id = ${id}::uuid AND status = 'UNPAID' AND expires_at > now()
          RETURNING *
        ) ${orderSelect(Prisma.sql`paid o`)}`;
      return o ? toRow(o) : null;
    },

    /** Status, whether the payment window has closed and how long it has to go (ms), by the database clock. */
    async state(id: string): Promise<{ status: OrderStatus; expired: boolean; expiresAt: Date; msToExpiry: number } | null> {
      const rows = await db.$queryRaw<{ status: OrderStatus; expired: boolean; expires_at: Date; ms: number }[]>`
        SELECT status::text AS status, expires_at <= now() AS expired, expires_at,
               GREATEST(0, ceil(extract(epoch FROM expires_at - now()) * 1000))::int AS ms
          FROM orders WHERE id = ${id}::uuid`;
      const r = rows[0];
      return r ? { status: r.status, expired: r.expired, expiresAt: r.expires_at, msToExpiry: r.ms } : null;
    },

    /** A customer's cancel of an UNPAID order, with its outbox row; the new notification's id, or null when nothing changed. */
    async cancel(id: string): Promise<{ notificationId: string | null } | null> {
      const rows = await db.$queryRaw<CancelledRow[]>(cancelSql(Prisma.sql`id = ${id}::uuid`, 'CUSTOMER'));
      const r = rows[0];
      return r ? { notificationId: r.notification_id } : null;
    },

    /**
     * The expiry of many orders in one statement: cancels those still UNPAID
     * whose window has closed by the database clock, with their outbox rows,
     * and answers for every id asked: cancelled (with its notification),
     * still inside its window (for how many ms), or settled (paid, cancelled
     * already, or unknown). A pay racing the statement on a row is judged as
     * by cancel(): the UPDATE re-checks `status = 'UNPAID'` on the row the
     * pay committed, so one of the two wins and the other changes nothing.
     */
    async expireMany(ids: readonly string[]): Promise<Map<string, ExpiryOutcome>> {
      if (ids.length === 0) return new Map();
      // Two batches sharing an order (a redelivery while the first still runs)
      // may lock their rows in different orders and deadlock: PostgreSQL
      // aborts one, whose jobs fail and are retried, finding them settled.
      const rows = await db.$queryRaw<{ id: string; cancelled: boolean; notification_id: string | null; status: OrderStatus; ms: number }[]>(
        expireManySql(ids),
      );
      const out = new Map<string, ExpiryOutcome>();
      for (const r of rows) {
        if (r.cancelled) out.set(r.id, { kind: 'cancelled', notificationId: r.notification_id });
        else if (r.status === 'UNPAID' && r.ms > 0) out.set(r.id, { kind: 'not_due', inMs: r.ms });
        else out.set(r.id, { kind: 'settled' });
      }
      for (const id of ids) if (!out.has(id)) out.set(id, { kind: 'settled' });
      return out;
    },

    /** Cancels up to `limit` orders unpaid for longer than `graceSeconds` past their deadline; returns their notification ids. */
    async cancelOverdue(graceSeconds: number, limit: number): Promise<{ cancelled: number; notificationIds: string[] }> {
      const rows = await db.$queryRaw<CancelledRow[]>(cancelOverdueSql(graceSeconds, limit));
      return { cancelled: rows.length, notificationIds: rows.flatMap((r) => (r.notification_id ? [r.notification_id] : [])) };
    },

    /**
     * Retention: each batch reads the next orders made before the cutoff
     * (database clock), by creation, and deletes those settled (PAID or
     * CANCELLED) that long ago with their items and notifications, once none
     * of those is left to deliver. Rows another transaction holds are
     * skipped, never waited for.
     */
    retention: [purgeOf(db, 'orders', PURGE_ORDERS)] as const,

    /** UNPAID orders expiring before `until`, in deadline order after a keyset cursor, for re-creating expiry jobs. */
    async listUnpaid(until: Date, after: { expiresAt: Date; id: string } | null, limit: number) {
      return db.order.findMany({
        where: {
          status: 'UNPAID',
          expiresAt: { lte: until },
          ...(after && {
            OR: [{ expiresAt: { gt: after.expiresAt } }, { expiresAt: after.expiresAt, id: { gt: after.id } }],
          }),
        },
        orderBy: [{ expiresAt: 'asc' }, { id: 'asc' }],
        take: limit,
        select: { id: true, expiresAt: true },
      });
    },
  };
}

export type OrdersRepository = ReturnType<typeof createOrdersRepository>;
