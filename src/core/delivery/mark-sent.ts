// Sent: the receiver took the call (a 2xx), so the row says SENT, whatever
// happened to it meanwhile: a withdrawal during the call cannot unsend it,
// and a delivery that lost its lease but whose call went through still tells
// the truth.
//
// One statement for the marks of the deliveries finishing at once, each row
// judged on its own. Guard: not SENT already (a mark is made once: a
// redelivered job's second mark changes nothing). Counts the attempt, clears
// the last error. Lock order: the rows, in id order (contract.ts).
// Returns, per id in order, whether it was marked here (a repeated id: only
// its first place).
import type { Db } from '../db.js';
import { Prisma } from '../../generated/prisma/client.js';
import { rowsLockedInOrderSql } from './contract.js';

/** The guard, over row `n`. */
const markable = (n: Prisma.Sql) => Prisma.sql`${n}.status <> 'SENT'`;

export async function markSentMany(db: Db, ids: readonly string[]): Promise<boolean[]> {
  const rows = await db.$queryRaw<{ id: string }[]>`
    UPDATE notifications SET status = 'SENT', sent_at = now(), attempts = attempts + 1, last_error = NULL
     WHERE ${rowsLockedInOrderSql(Prisma.sql`${[...ids]}::uuid[]`, markable)}
    RETURNING id::text AS id`;
  const marked = new Set(rows.map((r) => r.id));
  return ids.map((id, i) => marked.has(id) && ids.indexOf(id) === i);
}
