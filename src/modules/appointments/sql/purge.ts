// Purged: appointments whose slot lies behind the retention cutoff and that
// nothing changed since, with their reminders once none is left to deliver.
// One statement per batch (core/retention.ts), one kind per status: BOOKED
// by start (their partial index), CANCELLED by remind time (before the
// start). Guard: the slot and the last change behind the cutoff, the
// reminders settled. Lock order: the appointments (SKIP LOCKED), then their
// reminder rows. Returns the purges for the domain's retention job.
import { Prisma } from '../../../generated/prisma/client.js';
import { deliveriesDeleteSql, deliveriesSettledSql } from '../../../core/delivery/index.js';
import type { PurgeStatement } from '../../../core/retention.js';

/** An appointment may go when its slot lies behind the cutoff, nothing changed it since, and its reminders are settled. */
const finished = (cutoff: Prisma.Sql) =>
  Prisma.sql`t.starts_at < ${cutoff} AND t.updated_at < ${cutoff} AND ${deliveriesSettledSql('appointment_id', Prisma.sql`t.id`, cutoff)}`;
/** Retention's statements: BOOKED appointments by start (their partial index), CANCELLED ones by remind time (before the start). */
export const PURGE_BOOKED: PurgeStatement = {
  table: 'appointments',
  key: 'starts_at',
  range: Prisma.sql`t.status = 'BOOKED'`,
  terminal: finished,
  alsoDelete: [deliveriesDeleteSql('appointment_id', Prisma.sql`c`)],
};
export const PURGE_CANCELLED: PurgeStatement = { ...PURGE_BOOKED, key: 'remind_at', range: Prisma.sql`t.status = 'CANCELLED'` };
