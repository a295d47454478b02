// The timers' writes. A timer row and its firing's delivery row change
// together: a new timer, or a new firing of one, is one statement writing
// both (the delivery row through the delivery room's insert); a move or a
// cancel of the firing is the room's transition, run in the caller's
// transaction after it locked the timer.
// Guard: createTimers, the (client, key) unique index (an existing timer is
// left alone); fireAgain and touchTimer, the caller's lock on the timer (it
// read the firing's state under it); fireAgain's withdrawal, the room's.
// Lock order: the timer, then its delivery row.
import { Prisma } from '../../../generated/prisma/client.js';
import type { Db } from '../../../core/db.js';
import { dedupeKeySql, deliveryInsertSql, withdrawSql } from '../../../core/delivery/index.js';
import type { FiringPayload } from './reads.js';

/** A firing to write: its row's id (made by the caller, for the job id), fire time and what it carries. */
export type NewFiring = {
  key: string;
  timerId: string;
  rowId: string;
  dueAt: Date;
  firing: FiringPayload;
  /** Debounce: the burst's first call and its maximum wait; null otherwise. */
  burstStartedAt: Date | null;
  maxWaitMs: number | null;
};

/**
 * Creates the timers of `items` whose key `client` does not have yet, each
 * with its first firing, in one statement; answers the keys it created. A key
 * that exists (or is being created by a transaction that commits first: the
 * unique index waits for it) is left alone, for the caller to change.
 */
export async function createTimers(db: Pick<Db, '$queryRaw'>, client: string, items: readonly NewFiring[]): Promise<Set<string>> {
  if (items.length === 0) return new Set();
  const rows = await db.$queryRaw<{ key: string }[]>`
    WITH i AS (
      SELECT * FROM unnest(${items.map((x) => x.key)}::text[], ${items.map((x) => x.timerId)}::uuid[], ${items.map((x) => x.rowId)}::uuid[],
                           ${items.map((x) => x.dueAt)}::timestamptz[], ${items.map((x) => JSON.stringify(x.firing))}::jsonb[],
                           ${items.map((x) => x.burstStartedAt)}::timestamptz[], ${items.map((x) => x.maxWaitMs)}::bigint[])
               AS i(key, timer_id, row_id, due_at, firing, burst_started_at, max_wait_ms)
    ),
    t AS (
      INSERT INTO timers (id, client, key, notification_id, burst_started_at, max_wait_ms)
      SELECT timer_id, ${client}, key, row_id, burst_started_at, max_wait_ms FROM i
      ON CONFLICT (client, key) DO NOTHING
      RETURNING id, key
    ),
    n AS (
      ${deliveryInsertSql({
        kind: 'TIMER',
        id: Prisma.sql`i.row_id`,
        from: Prisma.sql`t JOIN i ON i.timer_id = t.id`,
        dedupeKey: dedupeKeySql.timerFiring(Prisma.sql`t.id::text`, Prisma.sql`'1'`),
        subject: { column: 'timer_id', value: Prisma.sql`t.id` },
        client: Prisma.sql`${client}`,
        payload: Prisma.sql`i.firing`,
        dueAt: Prisma.sql`i.due_at`,
      })}
      RETURNING id
    )
    SELECT t.key FROM t`;
  return new Set(rows.map((r) => r.key));
}

/**
 * A new firing of the timer `f.timerId` (its last one delivered, failed,
 * cancelled or in flight): its delivery row written and the timer pointed at
 * it, in one statement; then the timer's older firings withdrawn (the room's
 * withdrawal: one given up FAILED is CANCELLED, so a redrive of its dead job
 * delivers nothing; one in flight keeps its call, and is not retried if the
 * call fails), so a timer has one firing that may still be delivered, and a
 * cancel of the timer stops everything. The caller holds the timer's lock.
 */
export async function fireAgain(db: Pick<Db, '$executeRaw'>, client: string, f: NewFiring): Promise<void> {
  await db.$executeRaw`
    WITH t AS (
      UPDATE timers SET notification_id = ${f.rowId}::uuid, firings = firings + 1, burst_started_at = ${f.burstStartedAt},
             max_wait_ms = ${f.maxWaitMs}, updated_at = now()
       WHERE id = ${f.timerId}::uuid
      RETURNING id, firings
    )
    ${deliveryInsertSql({
      kind: 'TIMER',
      id: Prisma.sql`${f.rowId}::uuid`,
      from: Prisma.sql`t`,
      dedupeKey: dedupeKeySql.timerFiring(Prisma.sql`t.id::text`, Prisma.sql`t.firings::text`),
      subject: { column: 'timer_id', value: Prisma.sql`t.id` },
      client: Prisma.sql`${client}`,
      payload: Prisma.sql`${JSON.stringify(f.firing)}::jsonb`,
      dueAt: Prisma.sql`${f.dueAt}::timestamptz`,
    })}`;
  await db.$executeRaw`${withdrawSql({
    kind: 'TIMER',
    subject: 'timer_id',
    from: Prisma.sql`(SELECT t.id, ${dedupeKeySql.timerFiring(Prisma.sql`t.id::text`, Prisma.sql`t.firings::text`)} AS kept_key FROM timers t WHERE t.id = ${f.timerId}::uuid) s`,
    reason: 'replaced by a later firing of its timer',
  })}`;
}

/** The timer's own record of a change of its pending firing (the row moved by the delivery room). */
export async function touchTimer(db: Pick<Db, '$executeRaw'>, timerId: string, burst: { startedAt: Date | null; maxWaitMs: number | null }): Promise<void> {
  await db.$executeRaw`
    UPDATE timers SET updated_at = now(), burst_started_at = ${burst.startedAt}, max_wait_ms = ${burst.maxWaitMs} WHERE id = ${timerId}::uuid`;
}
