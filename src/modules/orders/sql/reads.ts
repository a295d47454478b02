// What the orders domain reads: an order of a client by id or idempotency
// key, its state by the database clock, and the UNPAID orders the
// reconciliation pass schedules again (every client's).
import { Prisma } from '../../../generated/prisma/client.js';
import type { Db } from '../../../core/db.js';
import { type OrderRow, type OrderStatus, type RawOrder, orderSelect, toRow } from './order-row.js';

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
  return db.order.findMany({
    where: {
      status: 'UNPAID',
      expiresAt: { lte: until },
      ...(after && {
        OR: [{ expiresAt: { gt: after.expiresAt } }, { expiresAt: after.expiresAt, id: { gt: after.id } }],
      }),
    },
    orderBy: [{ expiresAt: 'asc' }, { id: 'asc' }],
    take: limit,
    select: { id: true, expiresAt: true },
  });
}
