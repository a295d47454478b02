// What the parcels domain reads: areas, parcels, batches, and the waiting
// parcels the reconciliation pass puts back. The API's reads are of one
// client (another client's object is as absent as an unknown one); the
// reconciliation pass reads every client's, each row with its client.
import type { Db } from '../../../core/db.js';
import { type AreaRow, PARCEL_COLUMNS, type ParcelRow, type RecentBatchRow } from './parcel-row.js';

export function findArea(db: Db, client: string, code: string): Promise<AreaRow | null> {
  return db.area.findUnique({ where: { client_code: { client, code } } });
}

/** Waiting parcels of an area and the first one's arrival, from the source of truth. */
export async function waitingIn(db: Db, client: string, code: string): Promise<{ count: number; firstArrivalAt: Date | null }> {
  const r = await db.parcel.aggregate({ where: { client, areaCode: code, status: 'WAITING' }, _count: true, _min: { createdAt: true } });
  return { count: r._count, firstArrivalAt: r._min.createdAt };
}

export async function findParcel(db: Db, client: string, trackingNo: string): Promise<ParcelRow | null> {
  return (await findParcels(db, client, [trackingNo]))[0] ?? null;
}

/** The client's parcels of these tracking numbers that exist (in no particular order). */
export async function findParcels(db: Db, client: string, trackingNos: readonly string[]): Promise<ParcelRow[]> {
  if (trackingNos.length === 0) return [];
  return db.$queryRaw<ParcelRow[]>`SELECT ${PARCEL_COLUMNS} FROM parcels WHERE client = ${client} AND tracking_no = ANY(${[...trackingNos]}::text[])`;
}

export function findBatch(db: Db, client: string, id: string) {
  return db.batch.findUnique({ where: { id, client }, include: { parcels: { orderBy: { createdAt: 'asc' }, select: { trackingNo: true } } } });
}

export function listBatches(db: Db, client: string, areaCode: string, limit: number) {
  return db.batch.findMany({
    where: { client, areaCode },
    orderBy: [{ createdAt: 'desc' }, { id: 'asc' }],
    take: limit,
    include: { parcels: { orderBy: { createdAt: 'asc' }, select: { trackingNo: true } } },
  });
}

/**
 * The latest batches of every area (of one client, if given), newest first
 * (batches_created_at_idx keeps this a short index scan; a client's, read
 * along it, as long as other clients' batches come between).
 */
export function listRecentBatches(db: Db, limit: number, client?: string): Promise<RecentBatchRow[]> {
  return db.batch.findMany({
    where: client === undefined ? {} : { client },
    orderBy: [{ createdAt: 'desc' }, { id: 'asc' }],
    take: limit,
    select: { id: true, client: true, areaCode: true, vehiclePlate: true, reason: true, parcelCount: true, createdAt: true },
  });
}

/** A waiting parcel as the reconciliation pass finds it: every client's, each with its client. */
export type WaitingParcel = { client: string; trackingNo: string; areaCode: string };

/** WAITING parcels older than `olderThanMs`, oldest first, a bounded number. */
export function listOverdue(db: Db, olderThanMs: number, limit: number): Promise<WaitingParcel[]> {
  return db.$queryRaw<WaitingParcel[]>`
    SELECT client, tracking_no AS "trackingNo", area_code AS "areaCode" FROM parcels
     WHERE status = 'WAITING' AND created_at < now() - make_interval(secs => ${olderThanMs}::double precision / 1000)
     ORDER BY created_at, client, tracking_no LIMIT ${limit}`;
}

/** WAITING parcels that arrived within the last `youngerThanMs` but not within the last `olderThanMs`, oldest first, with their arrival (ms). */
export async function listRecentWaiting(db: Db, youngerThanMs: number, olderThanMs: number, limit: number): Promise<(WaitingParcel & { arrivedAt: number })[]> {
  const rows = await db.$queryRaw<(WaitingParcel & { arrivedMs: bigint })[]>`
    SELECT client, tracking_no AS "trackingNo", area_code AS "areaCode", floor(extract(epoch FROM created_at) * 1000)::bigint AS "arrivedMs"
      FROM parcels
     WHERE status = 'WAITING'
       AND created_at >= now() - make_interval(secs => ${youngerThanMs}::double precision / 1000)
       AND created_at < now() - make_interval(secs => ${olderThanMs}::double precision / 1000)
     ORDER BY created_at, client, tracking_no LIMIT ${limit}`;
  return rows.map((r) => ({ client: r.client, trackingNo: r.trackingNo, areaCode: r.areaCode, arrivedAt: Number(r.arrivedMs) }));
}
