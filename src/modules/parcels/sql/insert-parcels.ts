// Received: parcels inserted WAITING before they enter Redis (PostgreSQL is
// the truth a lost Redis entry is rebuilt from). One statement for a request's
// parcels. Guard: the area is known; the tracking number is new (ON CONFLICT
// DO NOTHING; a repeat within the request: its first). Lock order: the new
// rows in tracking-number order. Returns the rows it inserted.
import type { Db } from '../../../core/db.js';
import { PARCEL_COLUMNS, type ParcelRow } from './parcel-row.js';

/**
 * Inserts WAITING parcels of known areas in one statement (created_at from
 * the database clock); answers the rows it inserted. A parcel whose area
 * is unknown, or whose tracking number exists already (or comes twice),
 * is not inserted (the first of a repeat is).
 */
export async function insertParcels(db: Db, parcels: readonly { trackingNo: string; areaCode: string }[]): Promise<ParcelRow[]> {
  if (parcels.length === 0) return [];
  // One row per tracking number (its first of a known area), inserted in
  // tracking-number order: two statements sharing parcels wait for each
  // other in one order, never in a cycle (a deadlock).
  return db.$queryRaw<ParcelRow[]>`
    INSERT INTO parcels (tracking_no, area_code, created_at)
    SELECT DISTINCT ON (t.tracking_no) t.tracking_no, a.code, now()
      FROM unnest(${parcels.map((p) => p.trackingNo)}::text[], ${parcels.map((p) => p.areaCode)}::text[]) WITH ORDINALITY AS t(tracking_no, area_code, n)
      JOIN areas a ON a.code = t.area_code
     ORDER BY t.tracking_no, t.n
    ON CONFLICT (tracking_no) DO NOTHING
    RETURNING ${PARCEL_COLUMNS}`;
}
