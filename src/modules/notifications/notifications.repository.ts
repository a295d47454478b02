// SQL of notification delivery: conditional status changes, so a SENT row is
// never changed again and a redelivered job finds nothing to do.
import type { Db } from '../../core/db.js';

export type NotificationRow = {
  id: string;
  kind: string;
  status: 'PENDING' | 'SENT' | 'FAILED' | 'CANCELLED';
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

export function createNotificationsRepository(db: Db) {
  return {
    find(id: string): Promise<NotificationRow | null> {
      return db.notification.findUnique({ where: { id } });
    },

    /** PENDING/FAILED -> SENT; false when it was already SENT (or withdrawn meanwhile). */
    async markSent(id: string): Promise<boolean> {
      const n = await db.$executeRaw`
        UPDATE notifications SET status = 'SENT', sent_at = now(), attempts = attempts + 1, last_error = NULL
         WHERE id = ${id}::uuid AND status IN ('PENDING', 'FAILED')`;
      return n === 1;
    },

    /** Counts a failed attempt; the last one marks the row FAILED. */
    async recordFailure(id: string, error: string, final: boolean): Promise<void> {
      await db.$executeRaw`
        UPDATE notifications
           SET attempts = attempts + 1, last_error = ${error},
               status = CASE WHEN ${final} THEN 'FAILED'::"NotificationStatus" ELSE status END
         WHERE id = ${id}::uuid AND status IN ('PENDING', 'FAILED')`;
    },

    list(filter: NotificationFilter): Promise<NotificationRow[]> {
      return db.notification.findMany({ where: filter, orderBy: [{ createdAt: 'asc' }, { id: 'asc' }] });
    },

    /** PENDING rows older than `olderThanSeconds`, in creation order after a keyset cursor. */
    listPending(olderThanSeconds: number, after: { createdAt: Date; id: string } | null, limit: number) {
      return db.$queryRaw<{ id: string; createdAt: Date }[]>`
        SELECT id, created_at AS "createdAt" FROM notifications
         WHERE status = 'PENDING' AND created_at < now() - make_interval(secs => ${olderThanSeconds})
           AND (${after === null} OR (created_at, id) > (${after?.createdAt ?? new Date(0)}, ${after?.id ?? '00000000-0000-0000-0000-000000000000'}::uuid))
         ORDER BY created_at, id
         LIMIT ${limit}`;
    },
  };
}

export type NotificationsRepository = ReturnType<typeof createNotificationsRepository>;
