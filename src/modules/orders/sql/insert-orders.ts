// Created: orders and their items inserted in one statement (one round trip,
// atomic: all or none), UNPAID, created_at and expires_at from the database
// clock, the payment reminder's time from them (order-row.ts remindAtSql). Guard: the primary key and the idempotency key's unique index (a
// conflict fails the whole statement: the caller's idempotent create decides).
// Lock order: the new rows only. Returns the orders in input order.
import type { Db } from '../../../core/db.js';
import { Prisma } from '../../../generated/prisma/client.js';
import { type OrderItemRow, type OrderRow, remindAtSql } from './order-row.js';

export type NewOrder = {
  id: string;
  client: string;
  customerId: string;
  currency: string;
  totalCents: number;
  timeoutSeconds: number;
  /** Seconds before the deadline its payment reminder is written; null or absent: none. */
  reminderBeforeSeconds?: number | null;
  idempotencyKey: string | null;
  requestHash: string | null;
  items: OrderItemRow[];
};

export async function insertOrders(db: Db, orders: readonly NewOrder[]): Promise<OrderRow[]> {
  const items = orders.flatMap((o) => o.items.map((it, position) => ({ orderId: o.id, position, ...it })));
  const deadline = Prisma.sql`now() + make_interval(secs => t.timeout_s)`;
  const rows = await db.$queryRaw<{ id: string; created_at: Date; expires_at: Date; payment_remind_at: Date | null }[]>`
    WITH o AS (
      INSERT INTO orders (id, client, customer_id, currency, total_cents, created_at, expires_at, idempotency_key, request_hash,
                          payment_reminder_before_seconds, payment_remind_at)
      SELECT t.id, t.client, t.customer_id, t.currency, t.total_cents, now(), ${deadline}, t.idem_key, t.req_hash,
             t.lead, ${remindAtSql(deadline, Prisma.sql`t.lead`, Prisma.sql`now()`)}
        FROM unnest(${orders.map((o) => o.id)}::uuid[], ${orders.map((o) => o.client)}::text[], ${orders.map((o) => o.customerId)}::text[],
                    ${orders.map((o) => o.currency)}::text[], ${orders.map((o) => o.totalCents)}::bigint[],
                    ${orders.map((o) => o.timeoutSeconds)}::int[], ${orders.map((o) => o.idempotencyKey)}::text[],
                    ${orders.map((o) => o.requestHash)}::text[], ${orders.map((o) => o.reminderBeforeSeconds ?? null)}::int[])
             AS t(id, client, customer_id, currency, total_cents, timeout_s, idem_key, req_hash, lead)
      RETURNING id, created_at, expires_at, payment_remind_at
    ), i AS (
      INSERT INTO order_items (order_id, position, sku, quantity, unit_price_cents)
      SELECT o.id, t.position, t.sku, t.quantity, t.price
        FROM unnest(${items.map((i) => i.orderId)}::uuid[], ${items.map((i) => i.position)}::int[],
                    ${items.map((i) => i.sku)}::text[], ${items.map((i) => i.quantity)}::int[],
                    ${items.map((i) => i.unitPriceCents)}::int[]) AS t(order_id, position, sku, quantity, price)
        JOIN o ON o.id = t.order_id
    )
    SELECT id::text AS id, created_at, expires_at, payment_remind_at FROM o`;
  const times = new Map(rows.map((r) => [r.id, r]));
  return orders.map((o) => {
    const r = times.get(o.id);
    if (!r) throw new Error(`order ${o.id} was not inserted`);
    return {
      id: o.id,
      client: o.client,
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
      paymentReminderBeforeSeconds: o.reminderBeforeSeconds ?? null,
      paymentRemindAt: r.payment_remind_at,
      items: o.items.map((i) => ({ sku: i.sku, quantity: i.quantity, unitPriceCents: i.unitPriceCents })),
    };
  });
}
