// Withdrawn: a WAITING parcel taken out of its area for good (scanned into
// the wrong area, cancelled by its sender): it ends in no batch. One
// statement, the guard and the change together: a batch commit locks the
// parcel before attaching it and re-checks it (commit-batches.ts excludes
// WITHDRAWN), so of a withdraw and a commit racing for one parcel the first
// to lock it wins and the other finds it settled. Guard: status = 'WAITING'
// of the caller's client (a BATCHED or WITHDRAWN parcel is left as it is).
// Lock order: the one parcel. Returns the withdrawn row, or null when no
// WAITING parcel of that key was there (the caller reads what there is).
import type { Db } from '../../../core/db.js';
import { PARCEL_COLUMNS, type ParcelRow } from './parcel-row.js';

export async function withdrawParcel(db: Db, client: string, trackingNo: string): Promise<ParcelRow | null> {
  const rows = await db.$queryRaw<ParcelRow[]>`
    UPDATE parcels SET status = 'WITHDRAWN'
     WHERE client = ${client} AND tracking_no = ${trackingNo} AND status = 'WAITING'
    RETURNING ${PARCEL_COLUMNS}`;
  return rows[0] ?? null;
}
