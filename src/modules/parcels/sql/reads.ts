// What the parcels domain reads: areas, parcels, batches, and the waiting
// parcels the reconciliation pass puts back. The API's reads are of one
// client (another client's object is as absent as an unknown one); the
// reconciliation pass reads every client's, each row with its client.
import { Prisma } from '../../../generated/prisma/client.js';
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

/** The batch a manual flush made under this Idempotency-Key ("<client>/<key>"), of the caller's client, with the request's hash. */
export function findBatchByKey(db: Db, client: string, key: string) {
  return db.batch.findUnique({
    where: { idempotencyKey: key, client },
    include: { parcels: { orderBy: { createdAt: 'asc' }, select: { trackingNo: true } } },
  });
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

/** A waiting parcel as the reconciliation pass finds it: every client's, each with its client and its area's batch size. */
export type WaitingParcel = { client: string; trackingNo: string; areaCode: string; batchSize: number };

/** The defaults of an area without a rule of its own, and the reconciliation pass's grace. */
export type WaitRule = { batchSize: number; maxWaitMs: number; graceMs: number };

// An area's maximum wait in ms (its own, else the default), over the areas row `a`.
const waitMsOf = (r: WaitRule) => Prisma.sql`COALESCE(a.max_wait_seconds::double precision * 1000, ${r.maxWaitMs}::double precision)`;

/**
 * WAITING parcels that have waited longer than their area's maximum wait
 * plus the grace, oldest first, a bounded number. The index on (status,
 * created_at) reads the WAITING ones older than the shortest wait there is
 * (an area's own is 1 s at least; the default may be shorter) plus the
 * grace; each is held to its own area's.
 */
export function listOverdue(db: Db, r: WaitRule, limit: number): Promise<WaitingParcel[]> {
  return db.$queryRaw<WaitingParcel[]>`
    SELECT p.client, p.tracking_no AS "trackingNo", p.area_code AS "areaCode", COALESCE(a.batch_size, ${r.batchSize}::int) AS "batchSize"
      FROM parcels p JOIN areas a ON a.client = p.client AND a.code = p.area_code
     WHERE p.status = 'WAITING' AND p.created_at < now() - make_interval(secs => (${Math.min(1_000, r.maxWaitMs)} + ${r.graceMs}::double precision) / 1000)
       AND p.created_at < now() - make_interval(secs => (${waitMsOf(r)} + ${r.graceMs}::double precision) / 1000)
     ORDER BY p.created_at, p.client, p.tracking_no LIMIT ${limit}`;
}

/** A waiting parcel as listRecentWaiting answers it; its (arrival, client, tracking number) is the keyset a page is read after. */
export type RecentWaitingParcel = WaitingParcel & { arrivedAt: number };

/**
 * WAITING parcels that arrived not within the last `olderThanMs` and are not
 * yet overdue by their area's rule (listOverdue's), oldest first, with their
 * arrival (ms), a page of `limit` after `after` (keyset: arrival, client,
 * tracking number; from the start without). Read from the oldest the longest
 * wait allows (a day plus the grace), along the (status, created_at) index
 * from the page's start: a page costs its own rows, not those before it.
 */
export async function listRecentWaiting(
  db: Db,
  r: WaitRule,
  olderThanMs: number,
  limit: number,
  after: RecentWaitingParcel | null = null,
): Promise<RecentWaitingParcel[]> {
  const from = after
    ? Prisma.sql`AND p.created_at >= ${new Date(after.arrivedAt)}::timestamptz
       AND (p.created_at, p.client, p.tracking_no) > (${new Date(after.arrivedAt)}::timestamptz, ${after.client}, ${after.trackingNo})`
    : Prisma.empty;
  const rows = await db.$queryRaw<(WaitingParcel & { arrivedMs: bigint })[]>`
    SELECT p.client, p.tracking_no AS "trackingNo", p.area_code AS "areaCode", COALESCE(a.batch_size, ${r.batchSize}::int) AS "batchSize",
           floor(extract(epoch FROM p.created_at) * 1000)::bigint AS "arrivedMs"
      FROM parcels p JOIN areas a ON a.client = p.client AND a.code = p.area_code
     WHERE p.status = 'WAITING'
       AND p.created_at >= now() - make_interval(secs => (${Math.max(MAX_AREA_WAIT_MS, r.maxWaitMs)}::double precision + ${r.graceMs}::double precision) / 1000)
       AND p.created_at >= now() - make_interval(secs => (${waitMsOf(r)} + ${r.graceMs}::double precision) / 1000)
       AND p.created_at < now() - make_interval(secs => ${olderThanMs}::double precision / 1000)
       ${from}
     ORDER BY p.created_at, p.client, p.tracking_no LIMIT ${limit}`;
  return rows.map((x) => ({ client: x.client, trackingNo: x.trackingNo, areaCode: x.areaCode, batchSize: x.batchSize, arrivedAt: Number(x.arrivedMs) }));
}

/** The longest maximum wait an area may have (its CHECK constraint): a day. */
const MAX_AREA_WAIT_MS = 86_400_000;

/** The oldest WAITING parcels of the caller's area, up to `limit` (a manual flush's candidates; its commit decides). */
export async function oldestWaiting(db: Db, client: string, code: string, limit: number): Promise<{ trackingNo: string }[]> {
  return db.$queryRaw<{ trackingNo: string }[]>`
    SELECT tracking_no AS "trackingNo" FROM parcels
     WHERE client = ${client} AND area_code = ${code} AND status = 'WAITING'
     ORDER BY created_at, tracking_no LIMIT ${limit}`;
}

/** Every area with a rule of its own, with the rule's version (the reconciliation pass holds the Redis groups' rules to them). */
export function listAreaRules(
  db: Db,
): Promise<{ client: string; code: string; batchSize: number | null; maxWaitSeconds: number | null; ruleVersion: number }[]> {
  return db.area.findMany({
    where: { OR: [{ batchSize: { not: null } }, { maxWaitSeconds: { not: null } }] },
    select: { client: true, code: true, batchSize: true, maxWaitSeconds: true, ruleVersion: true },
  });
}
