// The orders invariant, read from PostgreSQL once the system has settled:
// every order ends PAID or CANCELLED by the rules, judged against what its
// client was told. A pay answered 200 means PAID for good; an order not paid
// (or whose pay was refused) is CANCELLED for PAYMENT_TIMEOUT, not before its
// deadline, with exactly one ORDER_CANCELLED notification delivered.
import type { Db } from '../../../src/core/db.js';
import type { OrderRecord } from '../drivers/orders.js';
import { type Checked, type Counts, type NotificationCounts, checkDeliveries, problemLog } from './counts.js';

export type OrdersReport = Counts & {
  paid: number;
  cancelled: number;
  /** A pay answered 200 but the order ended CANCELLED. */
  paidWith200ButCancelled: number;
  /** A pay refused (409) or never made, yet the order ended PAID. */
  paidWithout200: number;
  /** PAID with a paidAt after the deadline. */
  paidAfterDeadline: number;
  /** Cancelled before its deadline, or for another reason than the timeout. */
  wrongCancel: number;
  /** Orders in the database no client was told about (each must still be settled). */
  unknown: number;
  notifications: NotificationCounts;
};

export async function checkOrders(db: Db, records: readonly OrderRecord[], received: ReadonlyMap<string, number>): Promise<Checked<OrdersReport>> {
  const problems = problemLog();
  const rows = await db.order.findMany({ select: { id: true, status: true, expiresAt: true, paidAt: true, cancelledAt: true, cancelReason: true } });
  const notes = await db.notification.findMany({ where: { kind: 'ORDER_CANCELLED' }, select: { id: true, orderId: true, status: true } });
  const byId = new Map(rows.map((r) => [r.id, r]));
  const known = new Set(records.map((x) => x.id));
  const notesOf = new Map<string, { id: string; status: string }[]>();
  for (const n of notes) notesOf.set(n.orderId as string, [...(notesOf.get(n.orderId as string) ?? []), n]);

  const r: OrdersReport = {
    expected: records.length,
    seen: 0,
    lost: 0,
    duplicated: 0,
    paid: 0,
    cancelled: 0,
    paidWith200ButCancelled: 0,
    paidWithout200: 0,
    paidAfterDeadline: 0,
    wrongCancel: 0,
    unknown: rows.filter((o) => !known.has(o.id)).length,
    notifications: { expected: 0, seen: 0, lost: 0, duplicated: 0, resent: 0 },
  };
  const cancelledEvents = new Map<string, { id: string; status: string }[]>();
  for (const rec of records) {
    const o = byId.get(rec.id);
    if (!o || o.status === 'UNPAID') {
      r.lost++;
      problems.add(`order ${rec.id}: ${o ? 'still UNPAID' : 'missing'}`);
      continue;
    }
    const got200 = rec.pay?.status === 200;
    const extra = (notesOf.get(rec.id) ?? []).length;
    if (o.status === 'PAID') {
      r.paid++;
      if (!got200) {
        r.paidWithout200++;
        problems.add(`order ${rec.id}: PAID though its pay was answered ${rec.pay?.status ?? 'never sent'}`);
      } else if ((o.paidAt?.getTime() ?? Infinity) > o.expiresAt.getTime()) {
        // Stored to the ms (timestamptz(3)): a pay in the window's last half ms rounds up to the deadline, not past it.
        r.paidAfterDeadline++;
        problems.add(`order ${rec.id}: paid at ${o.paidAt?.toISOString()}, after its deadline ${o.expiresAt.toISOString()}`);
      } else if (extra > 0) {
        r.duplicated += extra;
        problems.add(`order ${rec.id}: PAID with ${extra} cancellation notifications`);
      } else {
        r.seen++;
      }
      continue;
    }
    r.cancelled++;
    cancelledEvents.set(`order ${rec.id} cancelled`, notesOf.get(rec.id) ?? []);
    if (got200) {
      r.paidWith200ButCancelled++;
      problems.add(`order ${rec.id}: pay answered 200 but the order is CANCELLED`);
    } else if (o.cancelReason !== 'PAYMENT_TIMEOUT' || (o.cancelledAt?.getTime() ?? 0) < o.expiresAt.getTime()) {
      r.wrongCancel++;
      problems.add(`order ${rec.id}: cancelled ${o.cancelReason} at ${o.cancelledAt?.toISOString()} for a deadline ${o.expiresAt.toISOString()}`);
    } else {
      r.seen++;
    }
  }
  for (const o of rows) {
    if (!known.has(o.id) && o.status === 'UNPAID') {
      r.lost++;
      problems.add(`order ${o.id} (unknown to the clients): still UNPAID`);
    }
  }
  r.notifications = checkDeliveries(cancelledEvents, received, problems);
  // An order cancelled twice shows as two cancellation notifications.
  r.duplicated += r.notifications.duplicated;
  return { ...r, problems: problems.examples };
}
