// Purged: the retention pass deletes a subject's history with its delivery
// rows, once none of them is left to deliver.
//
// Both are fragments of the domain's purge statement (core/retention.ts), one
// statement in a snapshot of its own: the rows it finds settled are the rows
// it deletes (a redrive committed meanwhile fails it, and it is made again).
// Guard: no row of the subject PENDING, SENDING or redriven, none made or
// tried since the cutoff. Lock order: the subject rows (SKIP LOCKED), then
// their delivery rows. Returns nothing of its own (the purge counts subjects).
import { Prisma } from '../../generated/prisma/client.js';
import type { DeliverySubject } from './contract.js';

/**
 * SQL: the subject `value` (a column expression of the caller's statement)
 * has no row still to deliver (PENDING, SENDING, or FAILED and redriven by an
 * operator) nor made or tried since `cutoff` (its delivery job may still be
 * dead-lettered, and redriven, for QUEUE_DEAD_RETENTION_DAYS after its last
 * try). A probe per subject row through the subject's index: as NOT EXISTS
 * the planner makes it an anti-join over every live row, read again by each batch.
 */
export const deliveriesSettledSql = (subject: DeliverySubject, value: Prisma.Sql, cutoff: Prisma.Sql): Prisma.Sql =>
  Prisma.sql`(SELECT 1 FROM notifications n WHERE n.${Prisma.raw(subject)} = ${value}
      AND (n.status IN ('PENDING', 'SENDING') OR n.redrive_requested OR greatest(n.created_at, n.sending_at) >= ${cutoff}) LIMIT 1) IS NULL`;

/** SQL: deletes the rows of the subjects listed by `ids` (a CTE of the caller's statement with an `id` column). */
export const deliveriesDeleteSql = (subject: DeliverySubject, ids: Prisma.Sql): Prisma.Sql =>
  Prisma.sql`DELETE FROM notifications WHERE ${Prisma.raw(subject)} IN (SELECT id FROM ${ids})`;
