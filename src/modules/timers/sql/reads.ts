// What the timers module reads: a timer with its current firing (the
// delivery row that says its state), one, locked for a change, or a page.
import { Prisma } from '../../../generated/prisma/client.js';
import type { Db } from '../../../core/db.js';
import type { NotificationStatus } from '../../../core/delivery/index.js';
import type { TimerTarget } from '../targets/contract.js';
import type { TimerState } from '../timers.schemas.js';

/** What a firing's delivery row carries: what to send, where, and how often to try. */
export type FiringPayload = { key: string; payload: unknown; fireAt: string; target: TimerTarget; maxAttempts: number };

export type TimerRow = {
  id: string;
  client: string;
  key: string;
  notificationId: string;
  firings: number;
  burstStartedAt: Date | null;
  maxWaitMs: number | null;
  createdAt: Date;
  updatedAt: Date;
  status: NotificationStatus;
  dueAt: Date;
  attempts: number;
  lastError: string | null;
  sentAt: Date | null;
  firing: FiringPayload;
};

const COLUMNS = Prisma.sql`t.id, t.client, t.key, t.notification_id AS "notificationId", t.firings,
  t.burst_started_at AS "burstStartedAt", t.max_wait_ms::float8 AS "maxWaitMs", t.created_at AS "createdAt", t.updated_at AS "updatedAt",
  n.status::text AS status, n.due_at AS "dueAt", n.attempts, n.last_error AS "lastError", n.sent_at AS "sentAt", n.payload AS firing`;
const FROM = Prisma.sql`timers t JOIN notifications n ON n.id = t.notification_id`;

const STATUS_OF: Record<TimerState, NotificationStatus> = {
  PENDING: 'PENDING',
  DELIVERING: 'SENDING',
  DELIVERED: 'SENT',
  FAILED: 'FAILED',
  CANCELLED: 'CANCELLED',
};
const STATE_OF: Record<NotificationStatus, TimerState> = {
  PENDING: 'PENDING',
  SENDING: 'DELIVERING',
  SENT: 'DELIVERED',
  FAILED: 'FAILED',
  CANCELLED: 'CANCELLED',
};
export const stateOf = (r: Pick<TimerRow, 'status'>): TimerState => STATE_OF[r.status];

export async function findTimer(db: Pick<Db, '$queryRaw'>, client: string, key: string, lock = false): Promise<TimerRow | null> {
  const rows = await db.$queryRaw<TimerRow[]>`
    SELECT ${COLUMNS} FROM ${FROM} WHERE t.client = ${client} AND t.key = ${key} ${lock ? Prisma.sql`FOR UPDATE OF t` : Prisma.empty}`;
  return rows[0] ?? null;
}

export async function findTimers(db: Pick<Db, '$queryRaw'>, client: string, keys: readonly string[]): Promise<TimerRow[]> {
  return db.$queryRaw<TimerRow[]>`SELECT ${COLUMNS} FROM ${FROM} WHERE t.client = ${client} AND t.key = ANY(${keys}::text[])`;
}

/** A client's timers in key order after `cursor`, of one state and key prefix when given. */
export async function listTimers(
  db: Pick<Db, '$queryRaw'>,
  client: string,
  o: { state?: TimerState | undefined; prefix?: string | undefined; cursor?: string | undefined; limit: number },
): Promise<TimerRow[]> {
  const prefix = o.prefix ?? '';
  return db.$queryRaw<TimerRow[]>`
    SELECT ${COLUMNS} FROM ${FROM}
     WHERE t.client = ${client} AND t.key > ${o.cursor ?? ''} AND left(t.key, ${prefix.length}) = ${prefix}
       ${o.state ? Prisma.sql`AND n.status = ${STATUS_OF[o.state]}::"NotificationStatus"` : Prisma.empty}
     ORDER BY t.key LIMIT ${o.limit}`;
}

/** The pending firings among `ids`: their due time as committed now (a move's job is checked against it). */
export async function pendingFirings(db: Pick<Db, '$queryRaw'>, ids: readonly string[]): Promise<{ id: string; dueAt: Date; firing: FiringPayload }[]> {
  // The status through an expression no index holds: found by their ids, not among every PENDING row.
  return db.$queryRaw`
    SELECT id, due_at AS "dueAt", payload AS firing FROM notifications
     WHERE id = ANY(${ids}::uuid[]) AND status::text = 'PENDING' AND withdrawn_at IS NULL`;
}
