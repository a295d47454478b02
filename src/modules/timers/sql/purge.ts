// Purged: timers untouched since the retention cutoff whose firings are all
// settled, with every firing's delivery row, by last change
// (timers_updated_at_idx). One statement per batch (core/retention.ts).
// Guard: not changed since the cutoff, no firing PENDING, SENDING or
// redriven, none made or tried since the cutoff. Lock order: the timers
// (SKIP LOCKED), then their rows. Returns the purge for the timers' retention job.
import { Prisma } from '../../../generated/prisma/client.js';
import { deliveriesDeleteSql, deliveriesSettledSql } from '../../../core/delivery/index.js';
import type { PurgeStatement } from '../../../core/retention.js';

export const PURGE_TIMERS: PurgeStatement = {
  table: 'timers',
  key: 'updated_at',
  terminal: (cutoff) => Prisma.sql`t.updated_at < ${cutoff} AND ${deliveriesSettledSql('timer_id', Prisma.sql`t.id`, cutoff)}`,
  alsoDelete: [deliveriesDeleteSql('timer_id', Prisma.sql`c`)],
};
