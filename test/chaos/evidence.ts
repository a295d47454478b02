// Shows that a fault reached the work, so a passing scenario means something:
// effects that came late by more than a lease (their job was held by a killed
// worker, lost with Redis, or failed and retried), and the service's own log
// lines about failures, retries and repairs, counted by message.
import type { Db } from '../../src/core/db.js';

export type Evidence = {
  /** Orders cancelled more than `lateMs` after their deadline (normally milliseconds). */
  ordersCancelledLate: number;
  /** Reminders written more than `lateMs` after the remind time of the slot they are for. */
  remindersLate: number;
  /** Warnings and errors of the service processes, and retries, by message. */
  logged: Record<string, number>;
};

// Info-level lines that still tell of a fault handled.
const NOTABLE_INFO = new Set(['job failed; retry scheduled', 'wake subscriber reconnected; re-checking all shards', 'periodic job (re)created']);
const WARN = 40;

export async function gatherEvidence(db: Db, logs: string, lateMs: number): Promise<Evidence> {
  const [orders] = await db.$queryRawUnsafe<{ n: number }[]>(
    `SELECT count(*)::int AS n FROM orders
      WHERE status = 'CANCELLED' AND cancelled_at > expires_at + make_interval(secs => $1::double precision / 1000)`,
    lateMs,
  );
  const [reminders] = await db.$queryRawUnsafe<{ n: number }[]>(
    `SELECT count(*)::int AS n FROM notifications n JOIN appointments a ON a.id = n.appointment_id
      WHERE n.kind = 'APPOINTMENT_REMINDER'
        AND n.dedupe_key = 'appointment-reminder:' || a.id || ':' || floor(extract(epoch FROM a.starts_at) * 1000)::bigint
        AND n.created_at > a.remind_at + make_interval(secs => $1::double precision / 1000)`,
    lateMs,
  );
  const logged: Record<string, number> = {};
  for (const line of logs.split('\n')) {
    if (!line.startsWith('{')) continue;
    let entry: { level?: number; msg?: string };
    try {
      entry = JSON.parse(line) as typeof entry;
    } catch {
      continue; // a line cut short by SIGKILL
    }
    if (entry.msg && ((entry.level ?? 0) >= WARN || NOTABLE_INFO.has(entry.msg))) logged[entry.msg] = (logged[entry.msg] ?? 0) + 1;
  }
  return { ordersCancelledLate: orders?.n ?? 0, remindersLate: reminders?.n ?? 0, logged };
}

/** How the work came back after a fault ended at `backAt` (ms since epoch, this host's clock, PostgreSQL's too). */
export type Recovery = {
  fault: string;
  /** From the end of the fault to the first business effect after it (a cancellation, a reminder, a batch). */
  firstEffectMs: number | null;
  /** From the end of the fault until the last effect that had fallen due by then was done. */
  backlogClearedMs: number | null;
  /** Effects that had fallen due by the end of the fault and happened after it. */
  backlog: number;
};

export async function recoveryAfter(db: Db, fault: string, backAt: number): Promise<Recovery> {
  const at = new Date(backAt);
  // Each effect with its due time: an order's deadline, a slot's remind time, a batch's first arrival + wait.
  const [r] = await db.$queryRawUnsafe<{ first: Date | null; last: Date | null; n: number }[]>(
    `WITH effects AS (
       SELECT cancelled_at AS done, expires_at AS due FROM orders WHERE status = 'CANCELLED' AND cancel_reason = 'PAYMENT_TIMEOUT'
       UNION ALL
       SELECT n.created_at, a.remind_at FROM notifications n JOIN appointments a ON a.id = n.appointment_id WHERE n.kind = 'APPOINTMENT_REMINDER'
       UNION ALL
       SELECT b.created_at, b.created_at FROM batches b
     )
     SELECT min(done) FILTER (WHERE done > $1) AS first,
            max(done) FILTER (WHERE done > $1 AND due <= $1) AS last,
            count(*) FILTER (WHERE done > $1 AND due <= $1)::int AS n
       FROM effects`,
    at,
  );
  const since = (d: Date | null | undefined) => (d ? d.getTime() - backAt : null);
  return { fault, firstEffectMs: since(r?.first), backlogClearedMs: since(r?.last), backlog: r?.n ?? 0 };
}
