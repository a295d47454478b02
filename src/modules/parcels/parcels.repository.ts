// SQL of parcel batching. A parcel row exists (WAITING) before it enters
// Redis; a batch is committed in one statement that attaches only parcels not
// yet in a batch and writes the sorters' notification with it.
import type { Db } from '../../core/db.js';

export type AreaRow = { code: string; vehiclePlate: string; sorterContact: string; createdAt: Date; updatedAt: Date };
export type ParcelRow = {
  trackingNo: string;
  areaCode: string;
  status: 'WAITING' | 'BATCHED';
  batchId: string | null;
  createdAt: Date;
  batchedAt: Date | null;
};
export type RecentBatchRow = {
  id: string;
  areaCode: string;
  vehiclePlate: string;
  reason: 'FULL' | 'TIMEOUT';
  parcelCount: number;
  createdAt: Date;
};
export type CommittedBatch = { batchId: string; attached: number; notificationId: string | null };

const PARCEL_COLUMNS = `tracking_no AS "trackingNo", area_code AS "areaCode", status::text AS status,
  batch_id AS "batchId", created_at AS "createdAt", batched_at AS "batchedAt"`;

export function createParcelsRepository(db: Db) {
  return {
    async upsertArea(code: string, vehiclePlate: string, sorterContact: string): Promise<AreaRow> {
      return db.area.upsert({
        where: { code },
        create: { code, vehiclePlate, sorterContact },
        update: { vehiclePlate, sorterContact, updatedAt: new Date() },
      });
    },

    findArea(code: string): Promise<AreaRow | null> {
      return db.area.findUnique({ where: { code } });
    },

    /** Waiting parcels of an area and the first one's arrival, from the source of truth. */
    async waiting(code: string): Promise<{ count: number; firstArrivalAt: Date | null }> {
      const r = await db.parcel.aggregate({ where: { areaCode: code, status: 'WAITING' }, _count: true, _min: { createdAt: true } });
      return { count: r._count, firstArrivalAt: r._min.createdAt };
    },

    /** Inserts a WAITING parcel of a known area; null when the area is unknown or the parcel exists. */
    async insertParcel(trackingNo: string, areaCode: string): Promise<ParcelRow | null> {
      const rows = await db.$queryRawUnsafe<ParcelRow[]>(
        `INSERT INTO parcels (tracking_no, area_code, created_at)
         SELECT $1, code, now() FROM areas WHERE code = $2
         ON CONFLICT (tracking_no) DO NOTHING
         RETURNING ${PARCEL_COLUMNS}`,
        trackingNo,
        areaCode,
      );
      return rows[0] ?? null;
    },

    async findParcel(trackingNo: string): Promise<ParcelRow | null> {
      const rows = await db.$queryRawUnsafe<ParcelRow[]>(`SELECT ${PARCEL_COLUMNS} FROM parcels WHERE tracking_no = $1`, trackingNo);
      return rows[0] ?? null;
    },

    /**
     * Commits batches in one statement (a flush round's worth at once): each
     * attaches only its parcels still unbatched (locked, so two committers never
     * share a parcel), is bound to its area's current vehicle and gets its
     * BATCH_DISPATCHED notification. A batch left with no parcel is not made.
     */
    async commitBatches(
      batches: readonly { id: string; areaCode: string; trackingNos: readonly string[] }[],
      reason: 'FULL' | 'TIMEOUT',
    ): Promise<CommittedBatch[]> {
      const ids: string[] = [];
      const areas: string[] = [];
      const tracking: string[] = [];
      for (const b of batches) {
        for (const t of b.trackingNos) {
          ids.push(b.id);
          areas.push(b.areaCode);
          tracking.push(t);
        }
      }
      if (tracking.length === 0) return [];
      const rows = await db.$queryRawUnsafe<{ batch_id: string; attached: number; notification_id: string | null }[]>(
        `WITH input AS (
           SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[]) AS t(batch_id, area_code, tracking_no)
         ), p AS (
           SELECT parcels.tracking_no, input.batch_id FROM parcels
             JOIN input ON parcels.tracking_no = input.tracking_no AND parcels.area_code = input.area_code
            WHERE parcels.batch_id IS NULL
            ORDER BY parcels.tracking_no -- one lock order for all committers: no deadlock
            FOR UPDATE OF parcels
         ), counts AS (
           SELECT p.batch_id, count(*)::int AS n FROM p GROUP BY p.batch_id
         ), b AS (
           INSERT INTO batches (id, area_code, vehicle_plate, reason, parcel_count, created_at)
           SELECT c.batch_id, a.code, a.vehicle_plate, $4::"BatchReason", c.n, now()
             FROM counts c JOIN (SELECT DISTINCT batch_id, area_code FROM input) i ON i.batch_id = c.batch_id
             JOIN areas a ON a.code = i.area_code
           RETURNING id, area_code, vehicle_plate, reason, parcel_count
         ), u AS (
           UPDATE parcels SET batch_id = p.batch_id, status = 'BATCHED', batched_at = now()
             FROM p WHERE parcels.tracking_no = p.tracking_no
           RETURNING parcels.tracking_no
         ), n AS (
           INSERT INTO notifications (id, kind, dedupe_key, batch_id, recipient, payload)
           SELECT gen_random_uuid(), 'BATCH_DISPATCHED', 'batch-dispatched:' || b.id, b.id, a.sorter_contact,
                  jsonb_build_object('batchId', b.id, 'area', b.area_code, 'vehiclePlate', b.vehicle_plate,
                                     'reason', b.reason::text, 'parcels', b.parcel_count)
             FROM b JOIN areas a ON a.code = b.area_code
           RETURNING id, batch_id
         )
         SELECT b.id AS batch_id, b.parcel_count AS attached, n.id AS notification_id
           FROM b LEFT JOIN n ON n.batch_id = b.id`,
        ids,
        areas,
        tracking,
        reason,
      );
      return rows.map((r) => ({ batchId: r.batch_id, attached: r.attached, notificationId: r.notification_id }));
    },

    findBatch(id: string) {
      return db.batch.findUnique({ where: { id }, include: { parcels: { orderBy: { createdAt: 'asc' }, select: { trackingNo: true } } } });
    },

    listBatches(areaCode: string, limit: number) {
      return db.batch.findMany({
        where: { areaCode },
        orderBy: [{ createdAt: 'desc' }, { id: 'asc' }],
        take: limit,
        include: { parcels: { orderBy: { createdAt: 'asc' }, select: { trackingNo: true } } },
      });
    },

    /** The latest batches of every area, newest first (batches_created_at_idx keeps this a short index scan). */
    listRecentBatches(limit: number): Promise<RecentBatchRow[]> {
      return db.batch.findMany({
        orderBy: [{ createdAt: 'desc' }, { id: 'asc' }],
        take: limit,
        select: { id: true, areaCode: true, vehiclePlate: true, reason: true, parcelCount: true, createdAt: true },
      });
    },

    /** WAITING parcels older than `olderThanMs`, oldest first, a bounded number. */
    listOverdue(olderThanMs: number, limit: number): Promise<{ trackingNo: string; areaCode: string }[]> {
      return db.$queryRawUnsafe(
        `SELECT tracking_no AS "trackingNo", area_code AS "areaCode" FROM parcels
          WHERE status = 'WAITING' AND created_at < now() - make_interval(secs => $1::double precision / 1000)
          ORDER BY created_at, tracking_no LIMIT $2`,
        olderThanMs,
        limit,
      );
    },
  };
}

export type ParcelsRepository = ReturnType<typeof createParcelsRepository>;
