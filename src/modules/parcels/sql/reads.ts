// What the parcels domain reads: areas, parcels, batches, and the waiting
// parcels the reconciliation pass puts back.
import type { Db } from '../../../core/db.js';
import { type AreaRow, PARCEL_COLUMNS, type ParcelRow, type RecentBatchRow } from './parcel-row.js';

export function findArea(db: Db, code: string): Promise<AreaRow | null> {
  return db.area.findUnique({ where: { code } });
}

/** Waiting parcels of an area and the first one's arrival, from the source of truth. */
export async function waitingIn(db: Db, code: string): Promise<{ count: number; firstArrivalAt: Date | null }> {
  const r = await db.parcel.aggregate({ where: { areaCode: code, status: 'WAITING' }, _count: true, _min: { createdAt: true } });
  return { count: r._count, firstArrivalAt: r._min.createdAt };
}

export async function findParcel(db: Db, trackingNo: string): Promise<ParcelRow | null> {
  return (await findParcels(db, [trackingNo]))[0] ?? null;
}

/** The parcels of these tracking numbers that exist (in no particular order). */
export async function findParcels(db: Db, trackingNos: readonly string[]): Promise<ParcelRow[]> {
  if (trackingNos.length === 0) return [];
  return db.$queryRaw<ParcelRow[]>`SELECT ${PARCEL_COLUMNS} FROM parcels WHERE tracking_no = ANY(${[...trackingNos]}::text[])`;
}

export function findBatch(db: Db, id: string) {
  return db.batch.findUnique({ where: { id }, include: { parcels: { orderBy: { createdAt: 'asc' }, select: { trackingNo: true } } } });
}

export function listBatches(db: Db, areaCode: string, limit: number) {
  return db.batch.findMany({
    where: { areaCode },
    orderBy: [{ createdAt: 'desc' }, { id: 'asc' }],
    take: limit,
    include: { parcels: { orderBy: { createdAt: 'asc' }, select: { trackingNo: true } } },
  });
}

/** The latest batches of every area, newest first (batches_created_at_idx keeps this a short index scan). */
export function listRecentBatches(db: Db, limit: number): Promise<RecentBatchRow[]> {
  return db.batch.findMany({
    orderBy: [{ createdAt: 'desc' }, { id: 'asc' }],
    take: limit,
    select: { id: true, areaCode: true, vehiclePlate: true, reason: true, parcelCount: true, createdAt: true },
  });
}

/** WAITING parcels older than `olderThanMs`, oldest first, a bounded number. */
export function listOverdue(db: Db, olderThanMs: number, limit: number): Promise<{ trackingNo: string; areaCode: string }[]> {
  return db.$queryRaw<{ trackingNo: string; areaCode: string }[]>`
    SELECT tracking_no AS "trackingNo", area_code AS "areaCode" FROM parcels
     WHERE status = 'WAITING' AND created_at < now() - make_interval(secs => ${olderThanMs}::double precision / 1000)
     ORDER BY created_at, tracking_no LIMIT ${limit}`;
}

/** WAITING parcels that arrived within the last `youngerThanMs` but not within the last `olderThanMs`, oldest first, with their arrival (ms). */
export async function listRecentWaiting(
  db: Db,
  youngerThanMs: number,
  olderThanMs: number,
  limit: number,
): Promise<{ trackingNo: string; areaCode: string; arrivedAt: number }[]> {
  const rows = await db.$queryRaw<{ trackingNo: string; areaCode: string; arrivedMs: bigint }[]>`
    SELECT tracking_no AS "trackingNo", area_code AS "areaCode", floor(extract(epoch FROM created_at) * 1000)::bigint AS "arrivedMs"
      FROM parcels
     WHERE status = 'WAITING'
       AND created_at >= now() - make_interval(secs => ${youngerThanMs}::double precision / 1000)
       AND created_at < now() - make_interval(secs => ${olderThanMs}::double precision / 1000)
     ORDER BY created_at, tracking_no LIMIT ${limit}`;
  return rows.map((r) => ({ trackingNo: r.trackingNo, areaCode: r.areaCode, arrivedAt: Number(r.arrivedMs) }));
}
