// The parcels invariant, read from PostgreSQL once the system has settled:
// every accepted parcel in exactly one batch of its own area (of its own
// client: the area's key is (client, code)), no batch above
// the batch size, no batch claiming more parcels than it holds (a parcel
// counted in two batches), each batch announced once to its sorters.
import type { Db } from '../../../src/core/db.js';
import type { ParcelRecord } from '../drivers/parcels.js';
import { type Checked, type Counts, type NotificationCounts, checkDeliveries, problemLog } from './counts.js';

export type ParcelsReport = Counts & {
  batches: number;
  full: number;
  timeout: number;
  /** Batches holding more parcels than the batch size. */
  aboveSize: number;
  /** FULL batches with fewer parcels than the batch size (allowed: part of the batch was batched another way first). */
  fullBelowSize: number;
  /** Parcels in a batch of another area, or batches on another vehicle than their area's. */
  wrongArea: number;
  notifications: NotificationCounts;
};

export async function checkParcels(
  db: Db,
  records: readonly ParcelRecord[],
  received: ReadonlyMap<string, number>,
  o: { batchSize: number; vehicleOf: (area: string) => string },
): Promise<Checked<ParcelsReport>> {
  const problems = problemLog();
  const parcels = await db.parcel.findMany({ select: { trackingNo: true, areaCode: true, batchId: true } });
  const batches = await db.batch.findMany({ include: { parcels: { select: { client: true, trackingNo: true, areaCode: true } } } });
  const notes = await db.notification.findMany({ where: { kind: 'BATCH_DISPATCHED' }, select: { id: true, batchId: true, status: true } });
  const byTracking = new Map(parcels.map((p) => [p.trackingNo, p]));
  const batchById = new Map(batches.map((b) => [b.id, b]));
  const known = new Set(records.map((x) => x.trackingNo));

  const r: ParcelsReport = {
    expected: records.length,
    seen: 0,
    lost: 0,
    duplicated: 0,
    batches: batches.length,
    full: batches.filter((b) => b.reason === 'FULL').length,
    timeout: batches.filter((b) => b.reason === 'TIMEOUT').length,
    aboveSize: 0,
    fullBelowSize: 0,
    wrongArea: 0,
    notifications: { expected: 0, seen: 0, lost: 0, duplicated: 0, resent: 0 },
  };
  for (const rec of records) {
    const p = byTracking.get(rec.trackingNo);
    const b = p?.batchId ? batchById.get(p.batchId) : undefined;
    if (!p || !b) {
      r.lost++;
      problems.add(`parcel ${rec.trackingNo}: ${p ? 'in no batch' : 'missing'}`);
    } else if (b.areaCode !== rec.area || p.areaCode !== rec.area) {
      r.wrongArea++;
      problems.add(`parcel ${rec.trackingNo} of ${rec.area}: in batch ${b.id} of ${b.areaCode}`);
    } else {
      r.seen++;
    }
  }
  for (const p of parcels) {
    if (!p.batchId && !known.has(p.trackingNo)) {
      r.lost++;
      problems.add(`parcel ${p.trackingNo} (unknown to the clients): in no batch`);
    }
  }
  const events = new Map<string, { id: string; status: string }[]>();
  for (const b of batches) {
    events.set(
      `batch ${b.id}`,
      notes.filter((n) => n.batchId === b.id),
    );
    // parcel_count is what the committing statement attached; more than the
    // batch holds now would mean parcels it counted ended up in another batch.
    if (b.parcelCount !== b.parcels.length) {
      r.duplicated += Math.abs(b.parcelCount - b.parcels.length);
      problems.add(`batch ${b.id}: parcel_count ${b.parcelCount} but ${b.parcels.length} parcels`);
    }
    if (b.parcels.length > o.batchSize) {
      r.aboveSize++;
      problems.add(`batch ${b.id}: ${b.parcels.length} parcels, above the batch size ${o.batchSize}`);
    }
    if (b.reason === 'FULL' && b.parcels.length < o.batchSize) r.fullBelowSize++;
    if (b.vehiclePlate !== o.vehicleOf(b.areaCode) || b.parcels.some((p) => p.areaCode !== b.areaCode || p.client !== b.client)) {
      r.wrongArea++;
      problems.add(`batch ${b.id} of ${b.areaCode}: vehicle ${b.vehiclePlate} or parcels of another area`);
    }
  }
  r.notifications = checkDeliveries(events, received, problems);
  r.duplicated += r.notifications.duplicated;
  return { ...r, problems: problems.examples };
}
