// The intended pause state of queues and job types (queue_controls) and the
// audit of operators' actions on it (queue_control_audit): the statements
// below, each with its own guard and lock order. Guard: none beyond each
// statement's own (an operator's word is the state). Lock order: the one
// queue_controls row a statement names, then its audit row.
import type { Db } from '../../../core/db.js';

/** The client or a transaction's: what the check's statements need. */
export type Sql = Pick<Db, '$queryRaw' | '$executeRaw'>;

/**
 * The first key of the pause check's two-key advisory lock (a key space of
 * its own: it never meets the migrations' one-key lock).
 */
const PAUSE_CHECK_LOCK_CLASS = 0x70636b31; // 'pck1'

/**
 * Runs `pass` in a transaction that holds the pause check's lock, so one
 * process at a time checks (every API process runs the loop; two at once
 * would repair and audit every lost pause twice). Answers null, without
 * running it, when another process holds the lock. The pass's statements
 * run on the transaction: no second pooled connection is needed, and a
 * process that dies lets the lock go with its transaction.
 * Guard: pg_try_advisory_xact_lock. Lock order: the advisory lock, then what the pass writes.
 */
export async function asTheOnlyChecker<T>(db: Db, timeoutMs: number, pass: (tx: Sql) => Promise<T>): Promise<T | null> {
  return db.$transaction(
    async (tx) => {
      const [row] = await tx.$queryRaw<{ got: boolean }[]>`SELECT pg_try_advisory_xact_lock(${PAUSE_CHECK_LOCK_CLASS}::int, 0) AS got`;
      return row?.got ? pass(tx) : null;
    },
    { timeout: timeoutMs },
  );
}

/** '*' for the whole queue, else a job type. */
export type ControlTarget = { readonly queue: string; readonly type: string };
export type ControlAction = 'PAUSE' | 'RESUME' | 'REAPPLY';

/**
 * Records an operator's pause or resume: the intended state and its audit
 * row. One statement (an upsert and an insert in one WITH), so the state
 * never changes without its audit row, nor the other way round.
 * Guard: none (an operator's word; a repeated pause writes its own audit row,
 * the state stays). Lock order: the one queue_controls row (the upsert).
 * Returns whether the intended state changed (false: it was already so).
 */
export async function recordControl(db: Db, t: ControlTarget, paused: boolean, actor: string, reason: string | null): Promise<boolean> {
  const action: ControlAction = paused ? 'PAUSE' : 'RESUME';
  const rows = await db.$queryRaw<{ changed: boolean }[]>`
    WITH before AS (
      SELECT paused FROM queue_controls WHERE queue = ${t.queue} AND type = ${t.type}
    ), up AS (
      INSERT INTO queue_controls (queue, type, paused, changed_at, changed_by)
      VALUES (${t.queue}, ${t.type}, ${paused}, now(), ${actor})
      ON CONFLICT (queue, type) DO UPDATE
        SET paused = EXCLUDED.paused, changed_at = EXCLUDED.changed_at, changed_by = EXCLUDED.changed_by
      RETURNING 1
    ), audit AS (
      INSERT INTO queue_control_audit (actor, queue, type, action, reason)
      VALUES (${actor}, ${t.queue}, ${t.type}, ${action}, ${reason})
      RETURNING 1
    )
    SELECT COALESCE((SELECT paused FROM before), false) <> ${paused} AS changed
      FROM up, audit`;
  return rows[0]?.changed ?? false;
}

/**
 * Writes the audit row of a pause (or a resume) the periodic check found lost
 * in Redis and re-applied. One INSERT; no guard (each re-application is an event of its
 * own); no lock beyond the new row. Returns nothing.
 */
export async function recordReapplied(db: Sql, t: ControlTarget, reason: string): Promise<void> {
  await db.$executeRaw`
    INSERT INTO queue_control_audit (actor, queue, type, action, reason)
    VALUES ('pause-check', ${t.queue}, ${t.type}, 'REAPPLY', ${reason})`;
}

/** Read only: every target whose intended state is paused. */
export async function pausedTargets(db: Sql): Promise<ControlTarget[]> {
  return db.$queryRaw<ControlTarget[]>`SELECT queue, type FROM queue_controls WHERE paused ORDER BY queue, type`;
}

export type AuditRow = { id: string; at: Date; actor: string; queue: string; type: string; action: ControlAction; reason: string | null };

/** Read only: the latest audit rows of a queue, newest first. */
export async function auditOf(db: Db, queue: string, limit: number): Promise<AuditRow[]> {
  return db.$queryRaw<AuditRow[]>`
    SELECT id::text AS id, at, actor, queue, type, action, reason
      FROM queue_control_audit WHERE queue = ${queue} ORDER BY id DESC LIMIT ${limit}`;
}
