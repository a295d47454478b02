// The orders model suite's rules of the payment reminder, held once a run has
// settled: at most one reminder per deadline the order had, each written
// between that deadline's reminder time and the deadline itself (by the
// database clock, within EPS_MS); none written after the order was paid or
// cancelled, none left undelivered and not withdrawn once it is, and none
// taken by the receiver from a call that started well after that (the pay
// or cancel withdraws one still waiting: only a call already running then
// may go through); and an order left unpaid through its
// last deadline, with no fault near, was reminded for it: its reminder of
// that deadline not left withdrawn by a move (a deadline moved away and back
// takes it back; one the timeout withdrew before its call is excused).
import { dedupeKey } from '../../../src/core/delivery/index.js';
import type { Real } from '../runner.js';
import { EPS_MS, type Order, type Seen, faultNear } from './model.js';

export const REMINDER_KIND = 'ORDER_PAYMENT_REMINDER';
/** How long after a pay's or cancel's 200 a reminder call claimed just before it may still reach the receiver (a loaded host). */
const ANSWERED_MARGIN_MS = 400;
/** The same from the start of a timeout's cancelling transaction (it may wait for locks before it withdraws). */
const TIMEOUT_CANCEL_MARGIN_MS = 2_000;

/** A withdrawal's reason when a move or an extension gave the reminder's deadline up (sql/*.ts of the orders). */
export const MOVED = /deadline (moved|extended)/;

/**
 * What breaks the reminder rules for order `o`, given its row, its reminder
 * rows and the receiver's calls. `counts.reminded` counts the orders reminded.
 */
export function reminderProblems(
  o: Order,
  row: Seen['row'],
  reminders: Seen['notes'],
  r: Real,
  counts: { reminded: number; remindersJudged: number },
): string[] {
  const found: string[] = [];
  const of = `order ${o.id}`;
  const byKey = new Map(o.deadlines.map((d) => [dedupeKey.orderPaymentReminder(o.id, d), d]));
  if (reminders.length > 0) counts.reminded++;
  if (o.leadMs === null && reminders.length > 0) found.push(`${of}: ${reminders.length} reminders, yet none was asked`);
  const settledAt = row.paidAt?.getTime() ?? row.cancelledAt?.getTime() ?? null;
  for (const n of reminders) {
    const deadline = byKey.get(n.dedupeKey);
    if (deadline === undefined) {
      found.push(`${of}: reminder ${n.id} for no deadline it had (${n.dedupeKey})`);
      continue;
    }
    const at = n.createdAt.getTime();
    if (o.leadMs !== null && at < deadline - o.leadMs - EPS_MS) found.push(`${of}: reminder ${n.id} written ${deadline - o.leadMs - at} ms before its time`);
    if (at > deadline + EPS_MS) found.push(`${of}: reminder ${n.id} written ${at - deadline} ms after its deadline`);
    if (settledAt !== null && at > settledAt) found.push(`${of}: reminder ${n.id} written ${at - settledAt} ms after the order was ${row.status}`);
    if (row.status !== 'UNPAID' && ['PENDING', 'FAILED', 'SENDING'].includes(n.status) && !n.withdrawnAt)
      found.push(`${of}: reminder ${n.id} still ${n.status}, not withdrawn, with the order ${row.status}`);
  }
  // A call running when the pay or cancel withdrew the reminder may go through; one that starts later may
  // not. The commit's moment is not recorded (now() is its transaction's start), so judged with a margin:
  // after the client heard its 200, or (a timeout's cancel) after the cancelling transaction began.
  const after = o.settledAnsweredAt ?? (row.cancelReason === 'PAYMENT_TIMEOUT' ? row.cancelledAt?.getTime() : undefined);
  if (after !== undefined) {
    const margin = o.settledAnsweredAt === undefined ? TIMEOUT_CANCEL_MARGIN_MS : ANSWERED_MARGIN_MS;
    const late = r.world.webhook.delivered.filter((c) => reminders.some((n) => n.id === c.body.id) && c.at > after + margin);
    if (late.length) found.push(`${of}: reminder ${late[0]!.body.id} taken by the receiver ${late[0]!.at - after} ms after the order was ${row.status}`);
  }
  // Reminded for its last deadline: judged when it stayed unpaid to it, the reminder's time came after its
  // creation, and no fault came near (from its creation to a second past the deadline).
  const last = o.deadlines[o.deadlines.length - 1]!;
  const remindAt = o.leadMs === null ? null : last - o.leadMs;
  const judged =
    remindAt !== null &&
    remindAt > o.createdAt &&
    row.status === 'CANCELLED' &&
    row.cancelReason === 'PAYMENT_TIMEOUT' &&
    !o.expiry?.jobCancelled &&
    !faultNear(r, o.createdAt, last + 1_000);
  if (judged) {
    counts.remindersJudged++;
    const forLast = reminders.find((n) => n.dedupeKey === dedupeKey.orderPaymentReminder(o.id, last));
    if (!forLast) found.push(`${of}: unpaid through its deadline, never reminded for it`);
    else if (forLast.status === 'CANCELLED' && forLast.lastError !== undefined && forLast.lastError !== null && MOVED.test(forLast.lastError))
      found.push(`${of}: its reminder ${forLast.id} for its last deadline was left withdrawn by a move (${forLast.lastError})`);
  }
  return found;
}
