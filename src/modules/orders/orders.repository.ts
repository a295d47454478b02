// The orders domain's statements on one database. Each lives in sql/, one
// file per transition with a header (what it does, why one statement, its
// guard, its lock order, what it returns); every change is judged by the
// database clock, and a null or empty answer means "already settled".
import type { Db } from '../../core/db.js';
import { purgeOf } from '../../core/retention.js';
import { cancelOrder, cancelOverdue, expireOrders } from './sql/cancel.js';
import { type NewOrder, insertOrders } from './sql/insert-orders.js';
import { payOrder } from './sql/pay.js';
import { PURGE_ORDERS } from './sql/purge.js';
import { findOrder, findOrderByIdempotencyKey, listUnpaid, orderState } from './sql/reads.js';

export type { ExpiryOutcome } from './sql/cancel.js';
export type { NewOrder } from './sql/insert-orders.js';
export type { CancelReason, OrderItemRow, OrderRow, OrderStatus } from './sql/order-row.js';

export function createOrdersRepository(db: Db) {
  return {
    insertMany: (orders: readonly NewOrder[]) => insertOrders(db, orders),
    find: (client: string, id: string) => findOrder(db, client, id),
    findByIdempotencyKey: (client: string, key: string) => findOrderByIdempotencyKey(db, client, key),
    pay: (client: string, id: string, paymentRef: string | null) => payOrder(db, client, id, paymentRef),
    state: (client: string, id: string) => orderState(db, client, id),
    cancel: (client: string, id: string) => cancelOrder(db, client, id),
    expireMany: (ids: readonly string[]) => expireOrders(db, ids),
    cancelOverdue: (graceSeconds: number, limit: number) => cancelOverdue(db, graceSeconds, limit),
    /** Retention: settled orders with their items and notifications (sql/purge.ts). */
    retention: [purgeOf(db, 'orders', PURGE_ORDERS)] as const,
    listUnpaid: (until: Date, after: { expiresAt: Date; id: string } | null, limit: number) => listUnpaid(db, until, after, limit),
  };
}

export type OrdersRepository = ReturnType<typeof createOrdersRepository>;
