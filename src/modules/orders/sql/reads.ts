// What the orders domain reads: an order of a client by id or idempotency
// key, its state by the database clock, and the UNPAID orders the
// reconciliation pass schedules again, and those whose payment reminder it
// repairs (every client's).
import { Prisma } from '../../../generated/prisma/client.js';
import type { Db } from '../../../core/db.js';
import { dedupeKeySql, liveSql } from '../../../core/delivery/index.js';
import { MAX_REMINDER_LEAD_SECONDS, type OrderRow, type OrderStatus, type RawOrder, orderSelect, toRow } from './order-row.js';

export async function findOrder(db: Db, client: string, id: string): Promise<OrderRow | null> {
  const [o] = await db.$queryRaw<RawOrder[]>(orderSelect(Prisma.sql`orders o WHERE o.id = ${id}::uuid AND o.client = ${client}`));
  return o ? toRow(o) : null;
}

export async function findOrderByIdempotencyKey(db: Db, client: string, key: string): Promise<{ order: OrderRow; requestHash: string | null } | null> {
  const [o] = await db.$queryRaw<RawOrder[]>(orderSelect(Prisma.sql`orders o WHERE o.idempotency_key = ${key} AND o.client = ${client}`));
  return o ? { order: toRow(o), requestHash: o.request_hash } : null;
}

/** Status, whether the payment window has closed and how long it has to go (ms), by the database clock. */
export async function orderState(
  db: Db,
  client: string,
  id: string,
): Promise<{ status: OrderStatus; expired: boolean; expiresAt: Date; msToExpiry: number } | null> {
  const rows = await db.$queryRaw<{ status: OrderStatus; expired: boolean; expires_at: Date; ms: number }[]>`
    SELECT status::text AS status, expires_at <= now() AS expired, expires_at,
           GREATEST(0, ceil(extract(epoch FROM expires_at - now()) * 1000))::int AS ms
      FROM orders WHERE id = ${id}::uuid AND client = ${client}`;
  const r = rows[0];
  return r ? { status: r.status, expired: r.expired, expiresAt: r.expires_at, msToExpiry: r.ms } : null;
}

/** UNPAID orders expiring before `until`, in deadline order after a keyset cursor, for re-creating expiry jobs. */
export function listUnpaid(db: Db, until: Date, after: { expiresAt: Date; id: string } | null, limit: number) {
  return db.$queryRaw<{ id: string; expiresAt: Date }[]>(listUnpaidSql(until, after, limit));
}

/** listUnpaid's statement (exported for the test of its plan): the cursor a row comparison, an index condition on (status, expires_at, id). */
export function listUnpaidSql(until: Date, after: { expiresAt: Date; id: string } | null, limit: number): Prisma.Sql {
  const cursor = after ? Prisma.sql`AND (o.expires_at, o.id) > (${after.expiresAt}::timestamptz, ${after.id}::uuid)` : Prisma.empty;
  return Prisma.sql`
    SELECT o.id::text AS id, o.expires_at AS "expiresAt" FROM orders o
     WHERE o.status = 'UNPAID' AND o.expires_at <= ${until}::timestamptz ${cursor}
     ORDER BY o.expires_at, o.id
     LIMIT ${limit}`;
}

/**
 * UNPAID orders whose payment reminder falls before `until`, their deadline
 * still ahead, and no live reminder for their current deadline (one withdrawn
 * when the deadline moved away and back counts as none), in reminder-time
 * order after a keyset cursor (the partial index of UNPAID orders by (reminder
 * time, id)): `overdue` when its time passed more than `graceSeconds` ago (its job
 * lost, or left at an older, later time). Bounded below too: a reminder time
 * more than the longest lead ago belongs to a deadline already passed, so the
 * index is read from there, not from the oldest UNPAID order's reminder.
 */
export async function listUnreminded(db: Db, until: Date, graceSeconds: number, after: { remindAt: Date; id: string } | null, limit: number) {
  return db.$queryRaw<{ id: string; remindAt: Date; overdue: boolean }[]>(listUnremindedSql(until, graceSeconds, after, limit));
}

/** listUnreminded's statement (exported for the test of its plan). */
export function listUnremindedSql(until: Date, graceSeconds: number, after: { remindAt: Date; id: string } | null, limit: number): Prisma.Sql {
  const cursor = after ? Prisma.sql`AND (o.payment_remind_at, o.id) > (${after.remindAt}::timestamptz, ${after.id}::uuid)` : Prisma.empty;
  return Prisma.sql`
    SELECT o.id::text AS id, o.payment_remind_at AS "remindAt", o.payment_remind_at < now() - make_interval(secs => ${graceSeconds}) AS overdue
      FROM orders o
     WHERE o.status = 'UNPAID' AND o.payment_remind_at IS NOT NULL AND o.payment_remind_at <= ${until}::timestamptz ${cursor}
       AND o.payment_remind_at > now() - make_interval(secs => ${MAX_REMINDER_LEAD_SECONDS})
       AND o.expires_at > now()
       AND NOT EXISTS (SELECT 1 FROM notifications n
                        WHERE n.dedupe_key = ${dedupeKeySql.orderPaymentReminder(Prisma.sql`o.id`, Prisma.sql`o.expires_at`)} AND ${liveSql(Prisma.sql`n`)})
     ORDER BY o.payment_remind_at, o.id
     LIMIT ${limit}`;
}
