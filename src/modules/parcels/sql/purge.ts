// Purged: batches made before the retention cutoff, with their parcels and
// the sorters' notices once none is left to deliver. One statement per batch
// (core/retention.ts). WAITING parcels belong to no batch and are never
// touched. Guard: the batch's deliveries settled. Lock order: the batches
// (SKIP LOCKED), then their parcels and rows. Returns the purge for the
// domain's retention job.
import { Prisma } from '../../../generated/prisma/client.js';
import { deliveriesDeleteSql, deliveriesSettledSql } from '../../../core/delivery/index.js';
import type { PurgeStatement } from '../../../core/retention.js';

/** Retention's statement: batches by creation, with their parcels and the sorters' notifications. */
export const PURGE_BATCHES: PurgeStatement = {
  table: 'batches',
  key: 'created_at',
  terminal: (cutoff) => deliveriesSettledSql('batch_id', Prisma.sql`t.id`, cutoff),
  alsoDelete: [Prisma.sql`DELETE FROM parcels WHERE batch_id IN (SELECT id FROM c)`, deliveriesDeleteSql('batch_id', Prisma.sql`c`)],
};
