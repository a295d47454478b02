// Moved: a WAITING parcel put into another area of its client, its arrival
// kept (its wait counts from its intake, in the new area by that area's
// rule). One statement, the guard and the change together: a batch commit
// finds a parcel by its key and its area and locks it (commit-batches.ts),
// so a commit of the old area racing the move either batched it first (the
// move then finds it BATCHED) or finds it moved and leaves it. Guard: status
// = 'WAITING' of the caller's client, and the new area the caller's
// (another client's area of that code is not one). Lock order: the one
// parcel (FOR UPDATE), then the area it now refers to (its foreign key's
// share lock). Returns the moved row with the area it left, or null when
// nothing was moved (the caller tells why).
import type { Db } from '../../../core/db.js';
import { PARCEL_COLUMNS, type ParcelRow } from './parcel-row.js';

export async function moveParcel(db: Db, client: string, trackingNo: string, to: string): Promise<(ParcelRow & { fromArea: string }) | null> {
  const rows = await db.$queryRaw<(ParcelRow & { fromArea: string })[]>`
    WITH old AS (
      -- Named apart from the parcel's columns, which the answer reads unqualified.
      SELECT client AS old_client, tracking_no AS old_tracking_no, area_code AS from_area FROM parcels
       WHERE client = ${client} AND tracking_no = ${trackingNo} AND status = 'WAITING'
         AND EXISTS (SELECT 1 FROM areas WHERE areas.client = ${client} AND areas.code = ${to})
       FOR UPDATE
    )
    UPDATE parcels SET area_code = ${to}
      FROM old
     WHERE parcels.client = old.old_client AND parcels.tracking_no = old.old_tracking_no
    RETURNING ${PARCEL_COLUMNS}, old.from_area AS "fromArea"`;
  return rows[0] ?? null;
}
