// The orders domain's statements on one database. Each lives in sql/, one
// file per transition with a header (what it does, why one statement, its
// guard, its lock order, what it returns); every change is judged by the
// database clock, and a null or empty answer means "already settled".
import type { Db } from '../../core/db.js';
import { purgeOf } from '../../core/retention.js';
import { cancelOrder, cancelOverdue, expireOrders } from './sql/cancel.js';
import { type NewOrder, insertOrders } from './sql/insert-orders.js';
import { type ExtendCursor, type ExtendRange, extendDeadlinesPage } from './sql/extend-deadlines.js';
import { type DeadlineMove, type MoveKey, moveDeadline, moveRefusal } from './sql/move-deadline.js';
import { payOrder } from './sql/pay.js';
import { PURGE_ORDERS } from './sql/purge.js';
import { findOrder, findOrderByIdempotencyKey, listUnpaid, listUnreminded, orderState } from './sql/reads.js';
import { writePaymentReminders } from './sql/write-payment-reminders.js';

export type { ExpiryOutcome } from './sql/cancel.js';
export type { NewOrder } from './sql/insert-orders.js';
export type { ExtendCursor, ExtendRange, Extended } from './sql/extend-deadlines.js';
export type { DeadlineMove, MoveKey, MoveRefusal } from './sql/move-deadline.js';
export type { ReminderOutcome } from './sql/write-payment-reminders.js';
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
    moveDeadline: (client: string, id: string, move: DeadlineMove, maxWindowSeconds: number, key: MoveKey) =>
      moveDeadline(db, client, id, move, maxWindowSeconds, key),
    moveRefusal: (client: string, id: string, move: DeadlineMove, maxWindowSeconds: number, key: MoveKey) =>
      moveRefusal(db, client, id, move, maxWindowSeconds, key),
    extendDeadlinesPage: (range: ExtendRange, after: ExtendCursor | null, limit: number) => extendDeadlinesPage(db, range, after, limit),
    remindMany: (ids: readonly string[]) => writePaymentReminders(db, ids),
    listUnreminded: (until: Date, graceSeconds: number, after: { remindAt: Date; id: string } | null, limit: number) =>
      listUnreminded(db, until, graceSeconds, after, limit),
    /** Retention: settled orders with their items and notifications (sql/purge.ts). */
    retention: [purgeOf(db, 'orders', PURGE_ORDERS)] as const,
    listUnpaid: (until: Date, after: { expiresAt: Date; id: string } | null, limit: number) => listUnpaid(db, until, after, limit),
  };
}

export type OrdersRepository = ReturnType<typeof createOrdersRepository>;
