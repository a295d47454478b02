// Purged: settled orders made before the retention cutoff, by creation
// (orders_created_at_idx), with their delivery rows once none is left to
// deliver (their items go by cascade). One statement per batch
// (core/retention.ts). Guard: not UNPAID, settled before the cutoff, its
// deliveries settled. Lock order: the orders (SKIP LOCKED), then their rows.
// Returns the purge for the domain's retention job.
import { Prisma } from '../../../generated/prisma/client.js';
import { deliveriesDeleteSql, deliveriesSettledSql } from '../../../core/delivery/index.js';
import type { PurgeStatement } from '../../../core/retention.js';

export const PURGE_ORDERS: PurgeStatement = {
  table: 'orders',
  key: 'created_at',
  terminal: (cutoff) =>
    Prisma.sql`t.status <> 'UNPAID' AND coalesce(t.paid_at, t.cancelled_at) < ${cutoff} AND ${deliveriesSettledSql('order_id', Prisma.sql`t.id`, cutoff)}`,
  alsoDelete: [deliveriesDeleteSql('order_id', Prisma.sql`c`)],
};
