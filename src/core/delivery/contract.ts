// The delivery row's contract: its kinds, statuses and subjects, the dedupe
// key of each business event (in TypeScript and as SQL over columns), the
// row's shape, and the port a domain calls to hand committed rows to delivery.
// The statements that change a row are the other files of this folder.
import { Prisma } from '../../generated/prisma/client.js';

export const NOTIFICATION_KINDS = ['ORDER_CANCELLED', 'APPOINTMENT_REMINDER', 'BATCH_DISPATCHED', 'TIMER', 'ORDER_PAYMENT_REMINDER'] as const;
export type NotificationKind = (typeof NOTIFICATION_KINDS)[number];

/**
 * PENDING: to be sent; SENDING: a delivery is calling the receiver; SENT: the
 * receiver took it; FAILED: given up after the last attempt, or refused (a
 * redrive sends it again); CANCELLED: withdrawn by its domain before it could
 * be sent. The whole life is drawn in README.md beside this file.
 */
export const NOTIFICATION_STATUSES = ['PENDING', 'SENDING', 'SENT', 'FAILED', 'CANCELLED'] as const;
export type NotificationStatus = (typeof NOTIFICATION_STATUSES)[number];

/** The subject column of a row: what business object it announces. */
export type DeliverySubject = 'order_id' | 'appointment_id' | 'batch_id' | 'timer_id';

/** The dedupe key of each kind's row: one per business event (a unique index holds it). */
export const dedupeKey = {
  orderCancelled: (orderId: string) => `order-cancelled:${orderId}`,
  /**
   * One reminder per slot and lead: the appointment, the start it was written
   * for and its lead (s); without a lead, the appointment's key lead (the
   * form every reminder had when there was one lead per booking).
   */
  appointmentReminder: (appointmentId: string, startsAtMs: number, leadSeconds?: number | null) =>
    `appointment-reminder:${appointmentId}:${startsAtMs}${leadSeconds == null ? '' : `:${leadSeconds}`}`,
  batchDispatched: (batchId: string) => `batch-dispatched:${batchId}`,
  /** One row per firing of a timer: its first, second, ... */
  timerFiring: (timerId: string, firing: number) => `timer:${timerId}:${firing}`,
  /** One payment reminder per deadline of an order: a moved deadline may remind again. */
  orderPaymentReminder: (orderId: string, expiresAtMs: number) => `order-payment-reminder:${orderId}:${expiresAtMs}`,
} as const;

/**
 * The same keys as SQL over column expressions of the caller's statement, for
 * statements that write or find many rows at once
 * (test/integration/core/outbox.test.ts holds the two forms together).
 */
export const dedupeKeySql = {
  orderCancelled: (orderId: Prisma.Sql) => Prisma.sql`'order-cancelled:' || ${orderId}`,
  /** `leadSeconds`: an int expression, NULL for the key lead's form. */
  appointmentReminder: (appointmentId: Prisma.Sql, startsAt: Prisma.Sql, leadSeconds?: Prisma.Sql) =>
    leadSeconds
      ? Prisma.sql`'appointment-reminder:' || ${appointmentId} || ':' || floor(extract(epoch FROM ${startsAt}) * 1000)::bigint || COALESCE(':' || ${leadSeconds}, '')`
      : Prisma.sql`'appointment-reminder:' || ${appointmentId} || ':' || floor(extract(epoch FROM ${startsAt}) * 1000)::bigint`,
  batchDispatched: (batchId: Prisma.Sql) => Prisma.sql`'batch-dispatched:' || ${batchId}`,
  timerFiring: (timerId: Prisma.Sql, firing: Prisma.Sql) => Prisma.sql`'timer:' || ${timerId} || ':' || ${firing}`,
  orderPaymentReminder: (orderId: Prisma.Sql, expiresAt: Prisma.Sql) =>
    Prisma.sql`'order-payment-reminder:' || ${orderId} || ':' || floor(extract(epoch FROM ${expiresAt}) * 1000)::bigint`,
} as const;

/**
 * SQL: `= ANY(...)` the ids of the rows `where` names (a condition over alias
 * `l`, and over `from` when given), locked in id order first. Every statement
 * that changes many delivery rows takes their locks so: in its scan's order
 * (storage order by a bitmap scan, a subject's index for a withdrawal) two
 * statements sharing rows can lock them head-on and deadlock, each waiting a
 * second until PostgreSQL breaks the cycle by failing one. `where` holds the
 * statement's own guard, so a row it would not change is not waited for (a
 * lock waits only for rows its snapshot finds, and rechecks them once
 * granted). An array, not `IN (subquery)`: computed once, it is an index
 * condition on the primary key, so the statement's own scan cannot be
 * planned as a read of every row against the subquery.
 */
export const idsLockedInOrderSql = (where: (l: Prisma.Sql) => Prisma.Sql, from: Prisma.Sql = Prisma.empty): Prisma.Sql =>
  Prisma.sql`= ANY(${lockedInOrderSql(where, from)})`;

/**
 * SQL: the uuid[] of idsLockedInOrderSql, for a statement whose rows are
 * not changed by id (the take-back's ON CONFLICT: take-back.ts). Evaluated
 * whole, once, where first needed (an InitPlan): every row its snapshot
 * shows locked before the statement goes on.
 */
export const lockedInOrderSql = (where: (l: Prisma.Sql) => Prisma.Sql, from: Prisma.Sql = Prisma.empty): Prisma.Sql =>
  Prisma.sql`ARRAY(SELECT l.id FROM notifications l ${from} WHERE ${where(Prisma.sql`l`)} ORDER BY l.id FOR UPDATE OF l)`;

/**
 * SQL for the WHERE of an UPDATE of `notifications` (unaliased) by ids: the
 * rows of `ids` (a uuid[] expression) that `guard` holds, locked in id order
 * first (idsLockedInOrderSql), the guard judged again on the row changed.
 */
export const rowsLockedInOrderSql = (ids: Prisma.Sql, guard: (n: Prisma.Sql) => Prisma.Sql): Prisma.Sql =>
  Prisma.sql`id ${idsLockedInOrderSql((l) => Prisma.sql`${l}.id = ANY(${ids}) AND ${guard(l)}`)} AND ${guard(Prisma.sql`notifications`)}`;

/** SQL: the row `n` is live, still to be delivered or delivered: neither CANCELLED nor withdrawn. */
export const liveSql = (n: Prisma.Sql): Prisma.Sql => Prisma.sql`(${n}.status <> 'CANCELLED' AND ${n}.withdrawn_at IS NULL)`;

export type NotificationRow = {
  id: string;
  /** The client (tenant) of its subject: receivers shared by several clients route on it. */
  client: string;
  kind: string;
  status: NotificationStatus;
  orderId: string | null;
  appointmentId: string | null;
  batchId: string | null;
  channel: string | null;
  recipient: string | null;
  payload: unknown;
  attempts: number;
  lastError: string | null;
  createdAt: Date;
  sentAt: Date | null;
};

/** The columns of a NotificationRow, for the statements that answer rows. */
export const ROW_COLUMNS = Prisma.sql`id, client, kind::text AS kind, status::text AS status, order_id AS "orderId",
  appointment_id AS "appointmentId", batch_id AS "batchId", channel::text AS channel, recipient, payload, attempts,
  last_error AS "lastError", created_at AS "createdAt", sent_at AS "sentAt"`;

/**
 * Hands committed rows to delivery. Best effort: a row it misses (Redis down,
 * crash right after the commit) is picked up by the relay pass.
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
  /**
   * For a row found PENDING by a job run again (its dispatch lost to a
   * crash): a delivery job that is pending or in flight is kept (a retry
   * waiting out its backoff goes on with its attempts counted), a dead one
   * replaced from the first attempt, a missing one scheduled. Not best
   * effort, as `fresh`.
   */
  readonly revive?: boolean;
  /** The rows' one kind, when the caller knows it: their jobs' priority without a read of the rows. */
  readonly kind?: NotificationKind;
};
