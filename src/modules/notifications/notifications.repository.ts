// SQL of notification delivery: conditional status changes, so a SENT row is
// never changed again and a redelivered job finds nothing to do, and the row
// tells the truth about the outside call. A delivery claims the row (SENDING)
// before it calls the receiver: a withdrawal after that cannot stop the call,
// so it only marks the row withdrawn, and the call's outcome decides: SENT if
// it went through (it did reach the receiver), CANCELLED if it failed.
import type { Db } from '../../core/db.js';
import type { NotificationStatus } from '../../core/outbox.js';

export type NotificationRow = {
  id: string;
  kind: string;
  status: NotificationStatus;
  orderId: string | null;
  appointmentId: string | null;
  batchId: string | null;
  channel: string | null;
  recipient: string | null;
  payload: unknown;
  attempts: number;
  lastError: string | null;
  createdAt: Date;
  sentAt: Date | null;
};

export type NotificationFilter = { orderId: string } | { appointmentId: string } | { batchId: string };

export type Claim =
  | { kind: 'claimed'; row: NotificationRow }
  | { kind: 'busy'; inMs: number }
  | { kind: 'withdrawn' }
  | { kind: 'done' }
  | { kind: 'failed' }
  | { kind: 'missing' };

const COLUMNS = `id, kind::text AS kind, status::text AS status, order_id AS "orderId", appointment_id AS "appointmentId",
  batch_id AS "batchId", channel::text AS channel, recipient, payload, attempts, last_error AS "lastError",
  created_at AS "createdAt", sent_at AS "sentAt"`;

export function createNotificationsRepository(db: Db) {
  const repo = {
    find(id: string): Promise<NotificationRow | null> {
      return db.notification.findUnique({ where: { id } });
    },

    /**
     * Claims the row for the call of a delivery (due at `dueAt`, Redis clock,
     * kept for operators): PENDING, FAILED with an operator's redrive
     * recorded (requestRedrive), or SENDING for longer than `staleMs` (the
     * call of a delivery that died mid-way: its outcome is unknown) ->
     * SENDING, the redrive request used up. A withdrawn row is never claimed.
     * Otherwise says why not: `busy` (another delivery's call may still be
     * running; try again in `inMs`), `done` (SENT or CANCELLED), `failed`
     * (FAILED, and no redrive asked for it), `withdrawn` (withdrawn, and no
     * call of it can be running any more), or `missing`.
     */
    async claim(id: string, staleMs: number, delivery: { dueAt: Date }): Promise<Claim> {
      return (await repo.claimMany([{ id, dueAt: delivery.dueAt }], staleMs))[0] as Claim;
    },

    /**
     * claim() of many rows in one statement, each judged on its own as claim()
     * judges it; an answer per item, in order. The ids must be distinct (one
     * statement changes a row once: a second claim of it would read the first's).
     */
    async claimMany(asked: readonly { id: string; dueAt: Date }[], staleMs: number): Promise<Claim[]> {
      // Ids as the database writes them (an upper-case uuid is the same row).
      const items = asked.map((i) => ({ id: i.id.toLowerCase(), dueAt: i.dueAt }));
      if (new Set(items.map((i) => i.id)).size !== items.length) throw new Error('claimMany: the ids must be distinct');
      const rows = await db.$queryRawUnsafe<(NotificationRow & { claimed: boolean; withdrawn: boolean; busyMs: number })[]>(
        `WITH t AS (SELECT * FROM unnest($1::uuid[], $3::timestamptz[]) AS t(id, due_at)),
         c AS (
           UPDATE notifications SET status = 'SENDING', sending_at = now(), redrive_requested = false,
                  sending_due_at = (SELECT t.due_at FROM t WHERE t.id = notifications.id)
            -- The status is compared as text, which no index holds: the rows
            -- are found by their ids (the primary key), whatever the
            -- statistics say. With statistics from a moment when few rows were
            -- PENDING, the planner read every PENDING and SENDING row through
            -- the status index instead: 120 ms a claim (bench:e2e, reminders
            -- after the orders' scenarios), against under 1.
            WHERE id = ANY($1::uuid[]) AND withdrawn_at IS NULL
              AND (status::text = 'PENDING' OR (status::text = 'FAILED' AND redrive_requested)
                   OR (status::text = 'SENDING' AND sending_at < now() - make_interval(secs => $2::double precision / 1000)))
           RETURNING ${COLUMNS}, true AS claimed, false AS withdrawn, 0 AS "busyMs"
         )
         SELECT * FROM c
         UNION ALL
         SELECT ${COLUMNS}, false, withdrawn_at IS NOT NULL,
                CASE WHEN status = 'SENDING'
                     THEN GREATEST(0, ceil(extract(epoch FROM sending_at + make_interval(secs => $2::double precision / 1000) - now()) * 1000))::int
                     ELSE 0 END
           FROM notifications WHERE id = ANY($1::uuid[]) AND id NOT IN (SELECT id FROM c)`,
        items.map((i) => i.id),
        staleMs,
        items.map((i) => i.dueAt),
      );
      const byId = new Map(rows.map((r) => [r.id, r]));
      return items.map(({ id }): Claim => {
        const r = byId.get(id);
        if (!r) return { kind: 'missing' };
        const { claimed, withdrawn, busyMs, ...row } = r;
        if (claimed) return { kind: 'claimed', row };
        if (row.status === 'SENT' || row.status === 'CANCELLED') return { kind: 'done' };
        if (busyMs > 0) return { kind: 'busy', inMs: busyMs };
        if (row.status === 'FAILED' && !withdrawn) return { kind: 'failed' };
        return withdrawn ? { kind: 'withdrawn' } : { kind: 'done' };
      });
    },

    /**
     * A withdrawn row no call of which can still be running -> CANCELLED. For
     * one left SENDING by a delivery that died mid-call, whether that call got
     * through is unknown: it is not made again (a reminder must not reach a
     * customer who gave up the slot), and `last_error` says so. False when
     * the row was not ended here (settled already, or no longer withdrawn: its
     * slot held again meanwhile).
     */
    async cancelWithdrawn(id: string): Promise<boolean> {
      const n = await db.$executeRaw`
        UPDATE notifications
           SET status = 'CANCELLED',
               last_error = CASE WHEN status = 'SENDING' THEN 'withdrawn; the outcome of a call interrupted before it was recorded is unknown'
                                 ELSE last_error END
         WHERE id = ${id}::uuid AND withdrawn_at IS NOT NULL AND status IN ('PENDING', 'FAILED', 'SENDING')`;
      return n === 1;
    },

    /**
     * The receiver took it: SENT, whatever happened to the row meanwhile (a
     * withdrawal during the call cannot unsend it). False when it was SENT already.
     */
    async markSent(id: string): Promise<boolean> {
      return (await repo.markSentMany([id]))[0] as boolean;
    },

    /** markSent() of many rows in one statement; whether each was marked here, in order. */
    async markSentMany(ids: readonly string[]): Promise<boolean[]> {
      const rows = await db.$queryRaw<{ id: string }[]>`
        UPDATE notifications SET status = 'SENT', sent_at = now(), attempts = attempts + 1, last_error = NULL
         WHERE id = ANY(${[...ids]}::uuid[]) AND status <> 'SENT'
        RETURNING id::text AS id`;
      const marked = new Set(rows.map((r) => r.id));
      return ids.map((id, i) => marked.has(id) && ids.indexOf(id) === i);
    },

    /**
     * The call failed: counted, and the row goes back to PENDING for the retry,
     * FAILED after the last attempt, or CANCELLED if it was withdrawn during the
     * call. Returns the new status (null when the row was not SENDING: another
     * delivery finished it).
     */
    async recordFailure(id: string, error: string, final: boolean, refused: boolean): Promise<NotificationStatus | null> {
      const rows = await db.$queryRaw<{ status: NotificationStatus }[]>`
        UPDATE notifications
           SET attempts = attempts + 1, last_error = ${error},
               status = (CASE WHEN withdrawn_at IS NOT NULL THEN 'CANCELLED' WHEN ${final} THEN 'FAILED' ELSE 'PENDING' END)::"NotificationStatus",
               -- A refusal (or the last failure) outranks a redrive asked while the call ran.
               redrive_requested = redrive_requested AND NOT ${final},
               refused = ${refused}
         WHERE id = ${id}::uuid AND status = 'SENDING'
        RETURNING status::text AS status`;
      return rows[0]?.status ?? null;
    },

    /**
     * Rows whose delivery job is gone for good (dead-lettered without the row
     * being settled): a withdrawn one -> CANCELLED; PENDING -> FAILED; SENDING
     * for longer than `sendingSeconds` (a call whose outcome was never
     * recorded) -> FAILED saying the outcome is unknown. A row claimed since
     * it was found (an operator redrove the job meanwhile: SENDING afresh) is
     * left to that delivery. An operator's redrive asked is kept: the redriven
     * job sends a FAILED one again.
     */
    async markAbandoned(ids: readonly string[], sendingSeconds: number): Promise<number> {
      if (ids.length === 0) return 0;
      return db.$executeRaw`
        UPDATE notifications
           SET status = (CASE WHEN withdrawn_at IS NOT NULL THEN 'CANCELLED' ELSE 'FAILED' END)::"NotificationStatus",
               last_error = CASE
                 WHEN status = 'SENDING' THEN 'delivery given up: its job was dead-lettered during a call whose outcome is unknown'
                 WHEN withdrawn_at IS NOT NULL THEN last_error
                 ELSE 'delivery given up: its job was dead-lettered before the outcome was recorded (see the dead set)' END
         WHERE id = ANY(${[...ids]}::uuid[]) -- by id whatever the statistics say (the status through ::text, as claimMany)
           AND (status::text = 'PENDING' OR (status::text = 'SENDING' AND sending_at < now() - make_interval(secs => ${sendingSeconds})))`;
    },

    /**
     * An operator redrives the dead delivery jobs of these rows (`asked`):
     * recorded before the queue moves the jobs, so the next delivery of each
     * may claim it even FAILED; or that redrive did not happen after all
     * (`asked` false: the job was not dead any more, or Redis failed). Only
     * here: a job that comes back by itself (Redis losing its last writes, a
     * refunded hand-back, a replaced job) looks in Redis just like a redriven
     * one, and must not call a refused row again. Settled rows are left alone.
     */
    async requestRedrive(ids: readonly string[], asked: boolean): Promise<void> {
      if (ids.length === 0) return;
      await db.$executeRaw`
        UPDATE notifications SET redrive_requested = ${asked}
         WHERE id = ANY(${[...ids]}::uuid[]) AND status::text IN ('PENDING', 'SENDING', 'FAILED')`;
    },

    list(filter: NotificationFilter): Promise<NotificationRow[]> {
      return db.notification.findMany({ where: filter, orderBy: [{ createdAt: 'asc' }, { id: 'asc' }] });
    },

    /**
     * Rows a delivery should be working on but may have lost: PENDING for
     * longer than `pendingSeconds`, or SENDING (claimed by a delivery) for
     * longer than `sendingSeconds`; in creation order after a keyset cursor.
     */
    listUnsettled(pendingSeconds: number, sendingSeconds: number, after: { createdAt: Date; id: string } | null, limit: number) {
      return db.$queryRaw<{ id: string; createdAt: Date }[]>`
        SELECT id, created_at AS "createdAt" FROM notifications
         WHERE ((status = 'PENDING' AND created_at < now() - make_interval(secs => ${pendingSeconds}))
                OR (status = 'SENDING' AND sending_at < now() - make_interval(secs => ${sendingSeconds})))
           AND (${after === null} OR (created_at, id) > (${after?.createdAt ?? new Date(0)}, ${after?.id ?? '00000000-0000-0000-0000-000000000000'}::uuid))
         ORDER BY created_at, id
         LIMIT ${limit}`;
    },
  };
  return repo;
}

export type NotificationsRepository = ReturnType<typeof createNotificationsRepository>;
