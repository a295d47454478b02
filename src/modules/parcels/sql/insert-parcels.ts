// Received: parcels inserted WAITING before they enter Redis (PostgreSQL is
// the truth a lost Redis entry is rebuilt from). One statement for a request's
// parcels (or for the single intakes of one turn, of any clients). Guard: the
// area is the parcel's client's (joined on (client, code)); the tracking
// number is new for that client (ON CONFLICT DO NOTHING; a repeat within the
// statement: its first). Lock order: the new rows in (client, tracking
// number) order. Returns the rows it inserted.
import type { Db } from '../../../core/db.js';
import { PARCEL_COLUMNS, type ParcelRow } from './parcel-row.js';

/** A parcel to take in: its client's tracking number, for an area of that client. */
export type NewParcel = { client: string; trackingNo: string; areaCode: string };

/**
 * Inserts WAITING parcels of known areas in one statement (created_at from
 * the database clock); answers the rows it inserted. A parcel whose area
 * is not its client's, or whose tracking number its client has already (or
 * names twice), is not inserted (the first of a repeat is).
 */
export async function insertParcels(db: Db, parcels: readonly NewParcel[]): Promise<ParcelRow[]> {
  if (parcels.length === 0) return [];
  // One row per tracking number of a client (its first of a known area),
  // inserted in key order: two statements sharing parcels wait for each
  // other in one order, never in a cycle (a deadlock).
  return db.$queryRaw<ParcelRow[]>`
    INSERT INTO parcels (client, tracking_no, area_code, created_at)
    SELECT DISTINCT ON (t.client, t.tracking_no) t.client, t.tracking_no, a.code, now()
      FROM unnest(${parcels.map((p) => p.client)}::text[], ${parcels.map((p) => p.trackingNo)}::text[], ${parcels.map((p) => p.areaCode)}::text[])
           WITH ORDINALITY AS t(client, tracking_no, area_code, n)
      JOIN areas a ON a.client = t.client AND a.code = t.area_code
     ORDER BY t.client, t.tracking_no, t.n
    ON CONFLICT (client, tracking_no) DO NOTHING
    RETURNING ${PARCEL_COLUMNS}`;
}
