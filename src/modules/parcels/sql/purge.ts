// Purged: batches made before the retention cutoff, with their parcels and
// the sorters' notices once none is left to deliver; and WITHDRAWN parcels
// taken in before it (in no batch, with no notice). One statement per batch
// (core/retention.ts). WAITING parcels are never touched.
// Guard: for batches, the batch's deliveries settled; for withdrawn parcels,
// the status again in the DELETE (WITHDRAWN is terminal: nothing changes such
// a row after).
// Lock order: the batches (SKIP LOCKED), then their parcels and rows; the
// withdrawn parcels in key order.
// Returns the purges for the domain's retention job.
import { Prisma } from '../../../generated/prisma/client.js';
import type { Db } from '../../../core/db.js';
import { deliveriesDeleteSql, deliveriesSettledSql } from '../../../core/delivery/index.js';
import type { Purge, PurgeBatch, PurgeStatement } from '../../../core/retention.js';

/** Retention's statement: batches by creation, with their parcels and the sorters' notifications. */
export const PURGE_BATCHES: PurgeStatement = {
  table: 'batches',
  key: 'created_at',
  terminal: (cutoff) => deliveriesSettledSql('batch_id', Prisma.sql`t.id`, cutoff),
  alsoDelete: [Prisma.sql`DELETE FROM parcels WHERE batch_id IN (SELECT id FROM c)`, deliveriesDeleteSql('batch_id', Prisma.sql`c`)],
};

/**
 * A parcel's key in a purge cursor's id: "<client>/<tracking number>" (a
 * client id holds no '/', so the first one ends it).
 */
const cursorId = (client: string, trackingNo: string) => `${client}/${trackingNo}`;

/**
 * Withdrawn parcels taken in before the cutoff (the age rule of batches: the
 * row's own time, RETENTION_DAYS), read in (created_at, client, tracking
 * number) order along the (status, created_at) index, `limit` a batch. The
 * parcels table has no uuid key, so this is a purge of its own rather than a
 * PurgeStatement; it is one statement all the same.
 */
export function purgeWithdrawn(db: Db): Purge {
  return {
    what: 'parcels WITHDRAWN',
    async purge(olderThanSeconds, limit, after): Promise<PurgeBatch> {
      const cutoff = Prisma.sql`now() - make_interval(secs => ${olderThanSeconds}::double precision)`;
      const slash = after ? after.id.indexOf('/') : -1;
      const from = after
        ? Prisma.sql`AND p.created_at >= ${after.at}::timestamptz
           AND (p.created_at, p.client, p.tracking_no) > (${after.at}::timestamptz, ${after.id.slice(0, slash)}, ${after.id.slice(slash + 1)})`
        : Prisma.empty;
      type Row = { examined: number; deleted: number; last_at: Date | null; last_client: string | null; last_tracking_no: string | null };
      const [row] = await db.$queryRaw<Row[]>`WITH s AS (
          SELECT p.client, p.tracking_no, p.created_at FROM parcels p
           WHERE p.status = 'WITHDRAWN' AND p.created_at < ${cutoff} ${from}
           ORDER BY p.created_at, p.client, p.tracking_no LIMIT ${limit}
        ), d AS (
          DELETE FROM parcels p USING s WHERE p.client = s.client AND p.tracking_no = s.tracking_no AND p.status = 'WITHDRAWN' RETURNING 1
        )
        SELECT (SELECT count(*) FROM s)::int AS examined, (SELECT count(*) FROM d)::int AS deleted,
               l.created_at AS last_at, l.client AS last_client, l.tracking_no AS last_tracking_no
          FROM (SELECT 1) one
          LEFT JOIN LATERAL (SELECT * FROM s ORDER BY created_at DESC, client DESC, tracking_no DESC LIMIT 1) l ON true`;
      return {
        examined: row?.examined ?? 0,
        deleted: row?.deleted ?? 0,
        next:
          row?.last_at && row.last_client !== null && row.last_tracking_no !== null
            ? { at: row.last_at, id: cursorId(row.last_client, row.last_tracking_no) }
            : null,
      };
    },
  };
}
