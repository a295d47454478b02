// Claimed: a delivery takes rows for its call to the receiver (SENDING), the
// last look at each row before the call, so a withdrawal or a SENT mark that
// committed first stops it.
//
// One statement for the rows of the deliveries running at once: each row is
// judged on its own by the UPDATE's guard, and the same statement reads why
// the others were not taken (the UNION's second half sees the snapshot before
// the UPDATE, so a row is answered once).
// Guard: not withdrawn, and PENDING; or FAILED with an operator's redrive
// recorded (redrive.ts; used up here); or SENDING for longer than `staleMs`
// (the call of a delivery that died mid-way: its outcome unknown). And not
// before the row's own due time (a timer's firing): a delivery due earlier
// is one the row was moved away from (its job not yet replaced, Redis down),
// answered `early`. Both due times are the Redis clock's: the job's as
// scheduled, the row's as the job was scheduled for it, so hosts' clocks
// apart cannot fire a row early. The status
// is compared as text, which no index holds: the rows are found by their
// primary key whatever the statistics say (planned on a moment when few rows
// were PENDING, the status index read every PENDING and SENDING row: 120 ms a
// claim against under 1).
// Lock order: the rows, in id order (contract.ts).
// Returns a Claim per asked id, in order.
import { Prisma } from '../../generated/prisma/client.js';
import type { Db } from '../db.js';
import { type NotificationRow, ROW_COLUMNS, rowsLockedInOrderSql } from './contract.js';

export type Claim =
  | { kind: 'claimed'; row: NotificationRow }
  /** Another delivery's call may still be running: look again in `inMs`. */
  | { kind: 'busy'; inMs: number }
  /** Due later than this delivery: look again in `inMs`. */
  | { kind: 'early'; inMs: number }
  /** Withdrawn, and no call of it can be running any more (cancelWithdrawn ends it). */
  | { kind: 'withdrawn' }
  /** SENT or CANCELLED. */
  | { kind: 'done' }
  /** FAILED, and no redrive asked for it. */
  | { kind: 'failed' }
  | { kind: 'missing' };

/** The ids must be distinct (one statement changes a row once: a second claim of it would read the first's). */
export async function claimDeliveries(db: Db, asked: readonly { id: string; dueAt: Date }[], staleMs: number): Promise<Claim[]> {
  // Ids as the database writes them (an upper-case uuid is the same row).
  const items = asked.map((i) => ({ id: i.id.toLowerCase(), dueAt: i.dueAt }));
  if (new Set(items.map((i) => i.id)).size !== items.length) throw new Error('claimDeliveries: the ids must be distinct');
  const ids = items.map((i) => i.id);
  const stale = Prisma.sql`make_interval(secs => ${staleMs}::double precision / 1000)`;
  // The guard, over row `n`.
  const claimable = (n: Prisma.Sql) => Prisma.sql`${n}.withdrawn_at IS NULL
         AND (${n}.status::text = 'PENDING' OR (${n}.status::text = 'FAILED' AND ${n}.redrive_requested)
              OR (${n}.status::text = 'SENDING' AND ${n}.sending_at < now() - ${stale}))
         AND (${n}.due_at IS NULL OR ${n}.due_at <= (SELECT t.due_at FROM t WHERE t.id = ${n}.id))`;
  const rows = await db.$queryRaw<(NotificationRow & { claimed: boolean; withdrawn: boolean; busyMs: number; earlyMs: number })[]>`
    WITH t AS (SELECT * FROM unnest(${ids}::uuid[], ${items.map((i) => i.dueAt)}::timestamptz[]) AS t(id, due_at)),
    c AS (
      UPDATE notifications SET status = 'SENDING', sending_at = now(), redrive_requested = false,
             sending_due_at = (SELECT t.due_at FROM t WHERE t.id = notifications.id)
       WHERE ${rowsLockedInOrderSql(Prisma.sql`${ids}::uuid[]`, claimable)}
      RETURNING ${ROW_COLUMNS}, true AS claimed, false AS withdrawn, 0 AS "busyMs", 0 AS "earlyMs"
    )
    SELECT * FROM c
    UNION ALL
    SELECT ${ROW_COLUMNS}, false, withdrawn_at IS NOT NULL,
           CASE WHEN status = 'SENDING' THEN GREATEST(0, ceil(extract(epoch FROM sending_at + ${stale} - now()) * 1000))::int ELSE 0 END,
           CASE WHEN n.due_at > t.due_at THEN ceil(extract(epoch FROM n.due_at - t.due_at) * 1000)::int ELSE 0 END
      FROM notifications n JOIN t USING (id) WHERE n.id NOT IN (SELECT id FROM c)`;
  const byId = new Map(rows.map((r) => [r.id, r]));
  return items.map(({ id }): Claim => {
    const r = byId.get(id);
    if (!r) return { kind: 'missing' };
    const { claimed, withdrawn, busyMs, earlyMs, ...row } = r;
    if (claimed) return { kind: 'claimed', row };
    if (row.status === 'SENT' || row.status === 'CANCELLED') return { kind: 'done' };
    if (busyMs > 0) return { kind: 'busy', inMs: busyMs };
    if (earlyMs > 0 && !withdrawn && row.status === 'PENDING') return { kind: 'early', inMs: earlyMs };
    if (row.status === 'FAILED' && !withdrawn) return { kind: 'failed' };
    return withdrawn ? { kind: 'withdrawn' } : { kind: 'done' };
  });
}
