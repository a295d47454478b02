// What the notifications module reads of the delivery rows. Every write is a
// transition of the delivery room (src/core/delivery/).
import type { Db } from '../../core/db.js';
import type { NotificationRow } from '../../core/delivery/index.js';

export type NotificationFilter = { orderId: string } | { appointmentId: string } | { batchId: string };

export function createNotificationsRepository(db: Db) {
  return {
    find(id: string): Promise<NotificationRow | null> {
      return db.notification.findUnique({ where: { id } });
    },

    /** Client `client`'s rows of one subject, oldest first: none for another client's subject, as for an unknown one. */
    list(client: string, filter: NotificationFilter): Promise<NotificationRow[]> {
      return db.notification.findMany({ where: { ...filter, client }, orderBy: [{ createdAt: 'asc' }, { id: 'asc' }] });
    },

    /**
     * Rows a delivery should be working on but may have lost: PENDING for
     * longer than `pendingSeconds`, or SENDING (claimed by a delivery) for
     * longer than `sendingSeconds`; in creation order after a keyset cursor.
     * Not a timer's firing: the timers module delivers and relays those.
     */
    listUnsettled(pendingSeconds: number, sendingSeconds: number, after: { createdAt: Date; id: string } | null, limit: number) {
      return db.$queryRaw<{ id: string; kind: string; createdAt: Date }[]>`
        SELECT id, kind::text AS kind, created_at AS "createdAt" FROM notifications
         WHERE kind <> 'TIMER' AND ((status = 'PENDING' AND created_at < now() - make_interval(secs => ${pendingSeconds}))
                OR (status = 'SENDING' AND sending_at < now() - make_interval(secs => ${sendingSeconds})))
           AND (${after === null} OR (created_at, id) > (${after?.createdAt ?? new Date(0)}, ${after?.id ?? '00000000-0000-0000-0000-000000000000'}::uuid))
         ORDER BY created_at, id
         LIMIT ${limit}`;
    },

    /** The kinds of the rows `ids` (row id -> kind), for their delivery jobs' priority; a row not found is left out. */
    async kindsOf(ids: readonly string[]): Promise<Map<string, string>> {
      const rows = await db.$queryRaw<{ id: string; kind: string }[]>`
        SELECT id, kind::text AS kind FROM notifications WHERE id = ANY(${[...ids]}::uuid[])`;
      return new Map(rows.map((r) => [r.id, r.kind]));
    },
  };
}

export type NotificationsRepository = ReturnType<typeof createNotificationsRepository>;
