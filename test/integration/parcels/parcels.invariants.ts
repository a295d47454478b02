// The batching rules the parcels' race tests hold the database to after each
// round: a batch counts exactly the parcels it holds, all of its own area,
// never more than the area's size (exactly the size when FULL), a withdrawn
// parcel in no batch, a BATCHED parcel in a batch and a WAITING one in none.
// (A parcel is in one batch at most by construction: one batch_id column.)
import { expect } from 'vitest';
import type { TestDb } from '../../helpers/db.js';

/** Checks the rules over the default client's areas `codes`, each of batch size `sizes[code]`; returns the batches by reason. */
export async function expectBatchRules(tdb: TestDb, sizes: Readonly<Record<string, number>>): Promise<Record<string, number>> {
  const codes = Object.keys(sizes);
  const batches = await tdb.db.batch.findMany({ where: { client: 'default', areaCode: { in: codes } }, include: { parcels: true } });
  const reasons: Record<string, number> = {};
  for (const b of batches) {
    reasons[b.reason] = (reasons[b.reason] ?? 0) + 1;
    const what = `batch ${b.id} (${b.reason}) of ${b.areaCode}`;
    expect(b.parcels.length, `${what}: parcel_count ${b.parcelCount}`).toBe(b.parcelCount);
    expect(b.parcels.length, what).toBeGreaterThan(0);
    expect(b.parcels.length, `${what}: above its area's size`).toBeLessThanOrEqual(sizes[b.areaCode] as number);
    if (b.reason === 'FULL') expect(b.parcels.length, `${what}: FULL below its area's size`).toBe(sizes[b.areaCode]);
    for (const p of b.parcels) {
      expect(p.areaCode, `${what} holds ${p.trackingNo} of ${p.areaCode}`).toBe(b.areaCode);
      expect(p.status, `${what} holds ${p.trackingNo}`).toBe('BATCHED');
    }
  }
  const parcels = await tdb.db.parcel.findMany({ where: { client: 'default', areaCode: { in: codes } } });
  for (const p of parcels) {
    if (p.status === 'BATCHED') expect(p.batchId, `${p.trackingNo} BATCHED`).not.toBeNull();
    else expect(p.batchId, `${p.trackingNo} ${p.status} in a batch`).toBeNull();
  }
  return reasons;
}
