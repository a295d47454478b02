// Deadline moved: an UNPAID order still inside its window gets a new payment
// deadline (a time, or its deadline plus some seconds), its reminder's time
// with it, and the move's Idempotency-Key; an undelivered reminder of its old
// deadline withdrawn in the same transaction (reminder-withdrawal.ts).
//
// One statement for the change: the guard is judged on the row as the UPDATE
// takes it, so a move racing the expiry, a pay or a cancel ends with one
// winner (the expiry and the pay judge the deadline this statement left, or
// the one before it); the withdrawal is a second statement after it.
// Guard: by the database clock (the one pay and the expiry judge the
// deadline by), `client = <the caller's> AND status = 'UNPAID' AND
// expires_at > now()`, the new deadline after now() and no later than
// created_at plus the longest window, and not the latest keyed move's key
// again (a move without a key leaves that key in place).
// Lock order: the one row, then its reminder rows. Returns the moved order,
// or null when nothing changed (then moveRefusal says why).
import { Prisma } from '../../../generated/prisma/client.js';
import type { Db } from '../../../core/db.js';
import { type OrderRow, type OrderStatus, type RawOrder, orderSelect, remindAtSql, toRow } from './order-row.js';
import { withdrawPaymentRemindersSql } from './reminder-withdrawal.js';

/** The new deadline: a time, or the current one plus seconds (exactly one given). */
export type DeadlineMove = { readonly expiresAt: Date } | { readonly extendBySeconds: number };

/** The move's Idempotency-Key ("<client>/<key>") and the hash of its body; null without a key. */
export type MoveKey = { readonly key: string; readonly hash: string } | null;

/** The new deadline as SQL over the orders row: evaluated on the row the statement takes. */
function newDeadlineSql(move: DeadlineMove): Prisma.Sql {
  return 'expiresAt' in move ? Prisma.sql`${move.expiresAt}::timestamptz` : Prisma.sql`(expires_at + make_interval(secs => ${move.extendBySeconds}::int))`;
}

export async function moveDeadline(db: Db, client: string, id: string, move: DeadlineMove, maxWindowSeconds: number, key: MoveKey): Promise<OrderRow | null> {
  const at = newDeadlineSql(move);
  const [[o]] = await db.$transaction([
    db.$queryRaw<RawOrder[]>`
    WITH moved AS (
      UPDATE orders
         SET expires_at = ${at},
             payment_remind_at = ${remindAtSql(at, Prisma.sql`payment_reminder_before_seconds`, Prisma.sql`created_at`)},
             -- A move without a key keeps the latest keyed move's, so that move's retry still changes nothing.
             deadline_move_key = coalesce(${key?.key ?? null}::text, deadline_move_key),
             deadline_move_hash = coalesce(${key?.hash ?? null}::text, deadline_move_hash)
       WHERE id = ${id}::uuid AND client = ${client} AND status = 'UNPAID' AND expires_at > now()
         AND ${at} > now() AND ${at} <= created_at + make_interval(secs => ${maxWindowSeconds}::int)
         AND (${key?.key ?? null}::text IS NULL OR deadline_move_key IS DISTINCT FROM ${key?.key ?? null}::text)
      RETURNING *
    ) ${orderSelect(Prisma.sql`moved o`)}`,
    db.$executeRaw(
      withdrawPaymentRemindersSql(Prisma.sql`id = ${id}::uuid AND client = ${client}`, 'order deadline moved before its payment reminder was delivered'),
    ),
  ]);
  return o ? toRow(o) : null;
}

/** Why a move changed nothing, read after it (by the database clock); null: nothing stops it now (it raced a change: try again). */
export type MoveRefusal = 'not_found' | 'replay' | 'key_reused' | OrderStatus | 'expired' | 'in_past' | 'too_long' | null;

export async function moveRefusal(db: Db, client: string, id: string, move: DeadlineMove, maxWindowSeconds: number, key: MoveKey): Promise<MoveRefusal> {
  const at = newDeadlineSql(move);
  const [r] = await db.$queryRaw<
    { status: OrderStatus; expired: boolean; in_past: boolean; too_long: boolean; move_key: string | null; move_hash: string | null }[]
  >`
    SELECT status::text AS status, expires_at <= now() AS expired, ${at} <= now() AS in_past,
           ${at} > created_at + make_interval(secs => ${maxWindowSeconds}::int) AS too_long,
           deadline_move_key AS move_key, deadline_move_hash AS move_hash
      FROM orders WHERE id = ${id}::uuid AND client = ${client}`;
  if (!r) return 'not_found';
  if (key && r.move_key === key.key) return r.move_hash === key.hash ? 'replay' : 'key_reused';
  if (r.status !== 'UNPAID') return r.status;
  if (r.expired) return 'expired';
  if (r.in_past) return 'in_past';
  if (r.too_long) return 'too_long';
  return null;
}
