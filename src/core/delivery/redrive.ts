// Redrive requested: an operator redrives the dead delivery jobs of these
// rows, so the next delivery of each may claim it even FAILED (claim.ts uses
// the request up). Recorded before the queue moves the jobs; `asked` false
// takes it back when that redrive did not happen after all (the job was not
// dead any more, or Redis failed).
//
// Only here, in PostgreSQL: a job that comes back by itself (Redis losing its
// last writes, a refunded hand-back, a replaced job) looks in Redis just like
// a redriven one, and must not call a refused row again.
// One statement. Guard: not settled (PENDING, SENDING or FAILED); SENT and
// CANCELLED rows are left alone. Lock order: the rows, in id order
// (contract.ts). Returns nothing.
import { Prisma } from '../../generated/prisma/client.js';
import type { Db } from '../db.js';
import { rowsLockedInOrderSql } from './contract.js';

/** The guard, over row `n`. */
const redrivable = (n: Prisma.Sql) => Prisma.sql`${n}.status::text IN ('PENDING', 'SENDING', 'FAILED')`;

export async function requestRedrive(db: Db, ids: readonly string[], asked: boolean): Promise<void> {
  if (ids.length === 0) return;
  await db.$executeRaw`
    UPDATE notifications SET redrive_requested = ${asked}
     WHERE ${rowsLockedInOrderSql(Prisma.sql`${[...ids]}::uuid[]`, redrivable)}`;
}
