// The priority of each notification kind's delivery job in the notifications
// queue: an order-cancelled notice goes ahead of a burst of reminders and batch
// notices waiting in the same queue (issue: priority lanes, article 000 §3.1).
// The queue claims due jobs by priority, with a starvation bound
// (QUEUE_PRIORITY_AGING_MS), so the lower kinds are delayed, never stranded.
import type { NotificationKind } from '../../core/delivery/index.js';

/**
 * 0..9, higher first among due jobs; 5 is the queue's default and costs no
 * memory, so the bulk kinds keep it and only the urgent ones are raised.
 * A timer's firing is the timers module's to deliver, on its own queue.
 */
export const PRIORITY_BY_KIND: Readonly<Record<Exclude<NotificationKind, 'TIMER'>, number>> = {
  // A customer whose order was cancelled: the most urgent news, and rare.
  ORDER_CANCELLED: 8,
  // Bound to a payment deadline: late is worthless.
  ORDER_PAYMENT_REMINDER: 6,
  // The bulk: a day's reminders, a shift's batch notices.
  APPOINTMENT_REMINDER: 5,
  BATCH_DISPATCHED: 5,
};

/** The delivery job's priority for a row of `kind`; undefined (the queue's default) for an unknown one. */
export function priorityOfKind(kind: string | undefined): number | undefined {
  return kind !== undefined && Object.hasOwn(PRIORITY_BY_KIND, kind) ? PRIORITY_BY_KIND[kind as keyof typeof PRIORITY_BY_KIND] : undefined;
}
