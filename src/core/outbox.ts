// The outbox: the notification rows a domain writes in the same statement as
// the state change they announce, and the port to the module that delivers
// them. This file owns the row's contract: its kinds, its statuses, its
// dedupe keys (one row per business event) and the INSERT the domains put in
// their statements. The composition root wires the delivery port; domains
// never import the notifications module.

export const NOTIFICATION_KINDS = ['ORDER_CANCELLED', 'APPOINTMENT_REMINDER', 'BATCH_DISPATCHED'] as const;
export type NotificationKind = (typeof NOTIFICATION_KINDS)[number];

/** The dedupe key of each kind's row: one per business event (a unique index holds it). */
export const dedupeKey = {
  orderCancelled: (orderId: string) => `order-cancelled:${orderId}`,
  /** One reminder per slot: the appointment and the start it was written for. */
  appointmentReminder: (appointmentId: string, startsAtMs: number) => `appointment-reminder:${appointmentId}:${startsAtMs}`,
  batchDispatched: (batchId: string) => `batch-dispatched:${batchId}`,
} as const;

/**
 * The same keys as SQL over columns, for statements that write or find many
 * rows at once (test/integration/outbox.test.ts holds the two forms together).
 * The arguments are column expressions of the caller's statement, never input.
 */
export const dedupeKeySql = {
  orderCancelled: (orderId: string) => `'order-cancelled:' || ${orderId}`,
  appointmentReminder: (appointmentId: string, startsAt: string) =>
    `'appointment-reminder:' || ${appointmentId} || ':' || floor(extract(epoch FROM ${startsAt}) * 1000)::bigint`,
  batchDispatched: (batchId: string) => `'batch-dispatched:' || ${batchId}`,
} as const;

/**
 * The INSERT of outbox rows a domain statement makes from the rows of `from`
 * (a CTE or table of that statement): each a new id, its kind, dedupe key and
 * subject, and what the receiver needs (channel, recipient, payload: SQL
 * expressions over `from`). The caller adds ON CONFLICT and RETURNING.
 */
export function outboxInsertSql(o: {
  kind: NotificationKind;
  from: string;
  dedupeKey: string;
  subject: { column: OutboxSubject; value: string };
  channel?: string;
  recipient?: string;
  payload: string;
}): string {
  const cols = ['id', 'kind', 'dedupe_key', o.subject.column, ...(o.channel ? ['channel'] : []), ...(o.recipient ? ['recipient'] : []), 'payload'];
  const values = [
    'gen_random_uuid()',
    `'${o.kind}'`,
    o.dedupeKey,
    o.subject.value,
    ...(o.channel ? [o.channel] : []),
    ...(o.recipient ? [o.recipient] : []),
    o.payload,
  ];
  return `INSERT INTO notifications (${cols.join(', ')}) SELECT ${values.join(', ')} FROM ${o.from}`;
}

/** A subject column of the outbox rows. */
export type OutboxSubject = 'order_id' | 'appointment_id' | 'batch_id';

/**
 * SQL: the subject `value` (a column expression of the caller's statement) has
 * no outbox row still to deliver (PENDING, SENDING, or FAILED and redriven by
 * an operator) nor made or tried since `cutoff` (its delivery job may still be
 * dead-lettered, and redriven, for QUEUE_DEAD_RETENTION_DAYS after its last
 * try). Only then may its history go (the retention pass). A probe per
 * subject row through the subject's index: as NOT EXISTS the planner makes it
 * an anti-join over every live notification, read again by each batch.
 */
export const outboxSettledSql = (subject: OutboxSubject, value: string, cutoff: string): string =>
  `(SELECT 1 FROM notifications n WHERE n.${subject} = ${value}
      AND (n.status IN ('PENDING', 'SENDING') OR n.redrive_requested OR greatest(n.created_at, n.sending_at) >= ${cutoff}) LIMIT 1) IS NULL`;

/** SQL: deletes the outbox rows of the subjects listed by `ids` (a CTE of the caller's statement with an `id` column). */
export const outboxDeleteSql = (subject: OutboxSubject, ids: string): string => `DELETE FROM notifications WHERE ${subject} IN (SELECT id FROM ${ids})`;

/**
 * A notification row's delivery state. PENDING: to be sent; SENDING: a
 * delivery is calling the receiver; SENT: the receiver took it; FAILED: given
 * up after the last attempt (a redrive sends it again); CANCELLED: withdrawn
 * by its domain before it could be sent (a reminder's slot was given up).
 */
export const NOTIFICATION_STATUSES = ['PENDING', 'SENDING', 'SENT', 'FAILED', 'CANCELLED'] as const;
export type NotificationStatus = (typeof NOTIFICATION_STATUSES)[number];

/**
 * Hands committed notification rows to delivery. Best effort: a row it misses
 * (Redis down, crash right after the commit) is picked up by the relay pass.
 */
export type NotificationDispatch = (notificationIds: readonly string[], options?: DispatchOptions) => Promise<void>;

export type DispatchOptions = {
  /**
   * A fresh delivery from its first attempt, replacing whatever delivery job
   * exists (dead, waiting out an old backoff, or in flight: fenced): for a row
   * taken back after a withdrawal. Not best effort: it throws when the job
   * could not be scheduled (the relay cannot replace a dead job).
   */
  readonly fresh?: boolean;
};
