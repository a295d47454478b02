// An order as the statements answer it: its row with its items, read in one
// query (no second round trip for the items).
import { Prisma } from '../../../generated/prisma/client.js';

/** The longest payment reminder lead a create may ask (PAYMENT_REMINDER_BEFORE_SECONDS has the same bound): 24 h. */
export const MAX_REMINDER_LEAD_SECONDS = 86_400;

export type OrderStatus = 'UNPAID' | 'PAID' | 'CANCELLED';
export type CancelReason = 'PAYMENT_TIMEOUT' | 'CUSTOMER';
export type OrderItemRow = { sku: string; quantity: number; unitPriceCents: number };
export type OrderRow = {
  id: string;
  /** The client (tenant) it belongs to. */
  client: string;
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
  /** Seconds before the deadline its payment reminder is written; null: none. */
  paymentReminderBeforeSeconds: number | null;
  /** When its payment reminder is written (expiresAt minus the lead); null: none, or it would come before the order was made. */
  paymentRemindAt: Date | null;
  items: OrderItemRow[];
};

/** An order row as orderSelect reads it. */
export type RawOrder = {
  id: string;
  client: string;
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
  payment_reminder_before_seconds: number | null;
  payment_remind_at: Date | null;
  request_hash: string | null;
  items: OrderItemRow[];
};

/** An order with its items; `from` names the rows as `o`: the table with a WHERE, or a CTE. */
export function orderSelect(from: Prisma.Sql): Prisma.Sql {
  return Prisma.sql`
    SELECT o.id::text AS id, o.client, o.customer_id, o.status::text AS status, o.currency, o.total_cents, o.created_at,
           o.expires_at, o.paid_at, o.payment_ref, o.cancelled_at, o.cancel_reason::text AS cancel_reason, o.request_hash,
           o.payment_reminder_before_seconds, o.payment_remind_at,
           (SELECT coalesce(json_agg(json_build_object('sku', i.sku, 'quantity', i.quantity, 'unitPriceCents', i.unit_price_cents)
                                     ORDER BY i.position), '[]'::json)
              FROM order_items i WHERE i.order_id = o.id) AS items
      FROM ${from}`;
}

/**
 * The payment reminder's time of a deadline `expiresAt` (SQL over the
 * caller's columns): the deadline minus the order's lead, or NULL when the
 * order has no reminder or that time would come before it was made (a window
 * shorter than the lead gets no nudge at once on create).
 */
export function remindAtSql(expiresAt: Prisma.Sql, lead: Prisma.Sql, createdAt: Prisma.Sql): Prisma.Sql {
  return Prisma.sql`CASE WHEN ${lead} IS NOT NULL AND ${expiresAt} - make_interval(secs => ${lead}) > ${createdAt}
                         THEN ${expiresAt} - make_interval(secs => ${lead}) END`;
}

export function toRow(o: RawOrder): OrderRow {
  return {
    id: o.id,
    client: o.client,
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
    paymentReminderBeforeSeconds: o.payment_reminder_before_seconds,
    paymentRemindAt: o.payment_remind_at,
    items: o.items,
  };
}
