// Per-area batching rules (PUT /areas/:code batchSize, maxWaitSeconds): each
// area batched by its own size and wait, a change applied to the parcels
// already waiting (a FULL batch at once, or a TIMEOUT batch as soon as the
// first one has waited the new wait), a rule Redis lost or holds stale set
// right again, and bad input refused with nothing written.
import { describe, expect, it } from 'vitest';
import { waitFor } from '../../helpers/redis.js';
import { useParcelsService } from './parcels.harness.js';
import { expectBatchRules } from './parcels.invariants.js';

// Defaults far from the areas' own rules: a batch by the default would show.
const h = useParcelsService('parcels_rules', { PARCEL_BATCH_SIZE: '10', PARCEL_MAX_WAIT_SECONDS: '600' });
const { putArea: put, row, batchesOf } = h;
const parcels = h.module;
const post = async (trackingNo: string, area: string) => (await h.post(trackingNo, area).expect(202)).body;

describe('an area with its own rule', () => {
  it('is batched by its own size, another by the default', async () => {
    expect((await put('AR-S3', { batchSize: 3 })).body).toMatchObject({ code: 'AR-S3', batchSize: 3, maxWaitSeconds: null });
    await put('AR-DEF').expect(200);
    await post('S3-1', 'AR-S3');
    await post('S3-2', 'AR-S3');
    expect((await post('S3-3', 'AR-S3')).status).toBe('BATCHED');
    for (let i = 1; i <= 3; i++) expect((await post(`DEF-${i}`, 'AR-DEF')).status).toBe('WAITING');
    expect((await batchesOf('AR-S3')).map((b) => [b.reason, b.parcelCount])).toEqual([['FULL', 3]]);
    expect(await batchesOf('AR-DEF')).toEqual([]);
    expect((await h.svc.api().get('/areas/AR-S3')).body).toMatchObject({ batchSize: 3, maxWaitSeconds: null, waiting: 0 });
    await expectBatchRules(h.tdb, { 'AR-S3': 3, 'AR-DEF': 10 });
  });

  it('is flushed at its own maximum wait (the flusher)', async () => {
    await put('AR-W1', { maxWaitSeconds: 1 }).expect(200);
    const p = await post('W1-1', 'AR-W1');
    expect(await waitFor(async () => (await row('W1-1')).status === 'BATCHED', 15_000, 50)).toBe(true);
    const [b] = await batchesOf('AR-W1');
    expect(b!.reason).toBe('TIMEOUT');
    expect(b!.createdAt.getTime()).toBeGreaterThanOrEqual(Date.parse(p.createdAt) + 1_000);
  });
});

describe('a rule changed while parcels wait', () => {
  it('a smaller size batches the oldest at once (FULL), the rest keep waiting', async () => {
    await put('AR-C1').expect(200);
    for (let i = 1; i <= 5; i++) await post(`C1-${i}`, 'AR-C1');
    await put('AR-C1', { batchSize: 2 }).expect(200);
    // The PUT's own call batched what the new size makes full: two batches of two, the fifth waits.
    const batches = await batchesOf('AR-C1');
    expect(batches.map((b) => [b.reason, b.parcels.map((x) => x.trackingNo).sort()]).sort()).toEqual([
      ['FULL', ['C1-1', 'C1-2']],
      ['FULL', ['C1-3', 'C1-4']],
    ]);
    expect((await row('C1-5')).status).toBe('WAITING');
    expect(await parcels().batcher.waiting('AR-C1')).toMatchObject({ count: 1, firstArrival: (await row('C1-5')).createdAt.getTime() });
    await expectBatchRules(h.tdb, { 'AR-C1': 2 });
  });

  it('a shorter wait flushes a group whose first parcel has now waited it (TIMEOUT)', async () => {
    await put('AR-C2').expect(200);
    await post('C2-1', 'AR-C2');
    await post('C2-2', 'AR-C2');
    const arrival = (await row('C2-1')).createdAt.getTime();
    // Due by the default in 10 minutes; by the new rule a second after the first arrival.
    expect((await parcels().batcher.waiting('AR-C2')).deadline).toBe(arrival + 600_000);
    await put('AR-C2', { maxWaitSeconds: 1 }).expect(200);
    expect(await waitFor(async () => (await row('C2-2')).status === 'BATCHED', 15_000, 50)).toBe(true);
    const [b] = await batchesOf('AR-C2');
    expect([b!.reason, b!.parcelCount]).toEqual(['TIMEOUT', 2]);
    expect(b!.createdAt.getTime()).toBeGreaterThanOrEqual(arrival + 1_000);
  });

  it('a longer wait holds a group longer; back to null is the default again', async () => {
    await put('AR-C3', { maxWaitSeconds: 2 }).expect(200);
    await post('C3-1', 'AR-C3');
    const arrival = (await row('C3-1')).createdAt.getTime();
    expect((await parcels().batcher.waiting('AR-C3')).deadline).toBe(arrival + 2_000);
    await put('AR-C3', { maxWaitSeconds: 3_600 }).expect(200);
    expect((await parcels().batcher.waiting('AR-C3')).deadline).toBe(arrival + 3_600_000);
    expect((await parcels().batcher.rules(0)).get('AR-C3')).toEqual({ batchSize: null, maxWaitMs: 3_600_000, version: 2 });
    expect((await put('AR-C3', { maxWaitSeconds: null }).expect(200)).body).toMatchObject({ batchSize: null, maxWaitSeconds: null });
    expect((await parcels().batcher.waiting('AR-C3')).deadline).toBe(arrival + 600_000);
    expect((await parcels().batcher.rules(0)).has('AR-C3')).toBe(false);
    expect((await row('C3-1')).status).toBe('WAITING');
  });
});

describe('a rule Redis does not have right', () => {
  it('is set again by the reconciliation pass when Redis lost it', async () => {
    await put('AR-L1', { batchSize: 4, maxWaitSeconds: 30 }).expect(200);
    await parcels().batcher.setRule('AR-L1', { batchSize: null, maxWaitMs: null }); // as if lost
    expect((await parcels().batcher.rules(0)).has('AR-L1')).toBe(false);
    expect((await parcels().reconcile.run()).rules).toBeGreaterThanOrEqual(1);
    expect((await parcels().batcher.rules(0)).get('AR-L1')).toEqual({ batchSize: 4, maxWaitMs: 30_000, version: 1 });
    expect((await parcels().reconcile.run()).rules).toBe(0);
  });

  it('is cleared by the pass when the area went back to the defaults', async () => {
    await put('AR-L2').expect(200);
    await parcels().batcher.setRule('AR-L2', { batchSize: 7, maxWaitMs: null }); // a stale one
    await parcels().reconcile.run();
    expect((await parcels().batcher.rules(0)).has('AR-L2')).toBe(false);
  });

  it('a stale larger size: the refused batch goes back with the area rule and is batched by it', async () => {
    await put('AR-L3', { batchSize: 3 }).expect(200);
    // Redis missed the change (its call failed): it still takes batches of 5.
    await parcels().batcher.setRule('AR-L3', { batchSize: 5, maxWaitMs: null });
    for (let i = 1; i <= 5; i++) await post(`L3-${i}`, 'AR-L3');
    // The take of 5 is refused by the commit (the area's size is 3), put back with the rule, and batched by it.
    expect(await waitFor(async () => (await batchesOf('AR-L3')).length === 1, 10_000, 50)).toBe(true);
    const [b] = await batchesOf('AR-L3');
    expect(b!.parcels.map((x) => x.trackingNo).sort()).toEqual(['L3-1', 'L3-2', 'L3-3']);
    expect((await parcels().batcher.rules(0)).get('AR-L3')).toEqual({ batchSize: 3, maxWaitMs: null, version: 1 });
    expect(await parcels().batcher.waiting('AR-L3')).toMatchObject({ count: 2 });
    await expectBatchRules(h.tdb, { 'AR-L3': 3 });
  });
});

describe('an older rule reaching Redis after a newer one', () => {
  it('is refused there (a late put back or setRule): the group keeps the newer, and what it puts back is judged by it', async () => {
    await put('AR-V1', { batchSize: 5 }).expect(200);
    for (let i = 1; i <= 2; i++) await post(`V1-${i}`, 'AR-V1');
    expect((await put('AR-V1', { batchSize: 3 }).expect(200)).body).toMatchObject({ batchSize: 3 });
    const v2 = { batchSize: 3, maxWaitMs: null, version: 2 };
    expect((await parcels().batcher.rules(0)).get('AR-V1')).toEqual(v2);
    // A commit that read the area before the PUT puts a parcel back with the rule it read (version 1).
    const late = await parcels().batcher.restore('AR-V1', [{ item: 'V1-3', arrivedAt: Date.now() }], {
      takeFull: true,
      rule: { batchSize: 5, maxWaitMs: null, version: 1 },
    });
    expect((await parcels().batcher.rules(0)).get('AR-V1')).toEqual(v2);
    // Three wait now: full by the newer size, taken at once.
    expect(late.batches.map((b) => b.length)).toEqual([3]);
    // A setRule of the older version (a PUT's call answered late) is refused too; one of the same version is set again.
    await parcels().batcher.setRule('AR-V1', { batchSize: 5, maxWaitMs: 1_000, version: 1 });
    expect((await parcels().batcher.rules(0)).get('AR-V1')).toEqual(v2);
    await parcels().batcher.setRule('AR-V1', v2);
    expect((await parcels().batcher.rules(0)).get('AR-V1')).toEqual(v2);
    // Back to the defaults keeps the version: an older rule cannot come back after it either.
    await put('AR-V1').expect(200);
    expect((await parcels().batcher.rules(0)).has('AR-V1')).toBe(false);
    await parcels().batcher.setRule('AR-V1', v2);
    expect((await parcels().batcher.rules(0)).has('AR-V1')).toBe(false);
    expect((await h.tdb.db.area.findUniqueOrThrow({ where: { client_code: { client: 'default', code: 'AR-V1' } } })).ruleVersion).toBe(3);
  });
});

describe('bad input of a rule', () => {
  const cases: [string, Record<string, unknown>][] = [
    ['batchSize 0', { batchSize: 0 }],
    ['batchSize 1001', { batchSize: 1_001 }],
    ['batchSize 2.5', { batchSize: 2.5 }],
    ['batchSize as text', { batchSize: '3' }],
    ['batchSize negative', { batchSize: -1 }],
    ['maxWaitSeconds 0', { maxWaitSeconds: 0 }],
    ['maxWaitSeconds 86401', { maxWaitSeconds: 86_401 }],
    ['maxWaitSeconds 1.5', { maxWaitSeconds: 1.5 }],
    ['maxWaitSeconds as text', { maxWaitSeconds: '60' }],
    ['maxWaitSeconds huge', { maxWaitSeconds: 1e300 }],
  ];
  it.each(cases)('%s: 400, the area row and its Redis group as they were', async (_name, rule) => {
    await put('AR-BAD', { batchSize: 5, maxWaitSeconds: 100 }).expect(200);
    await post(`BAD-${Math.random().toString(36).slice(2, 10)}`, 'AR-BAD');
    const rowBefore = await h.tdb.db.area.findUniqueOrThrow({ where: { client_code: { client: 'default', code: 'AR-BAD' } } });
    const groupBefore = [await parcels().batcher.waiting('AR-BAD'), (await parcels().batcher.rules(0)).get('AR-BAD')];
    const res = await put('AR-BAD', { ...rule, vehiclePlate: 'OTHER' });
    expect([res.status, res.body.code, res.headers['content-type']]).toEqual([400, 'VALIDATION_FAILED', expect.stringContaining('application/problem+json')]);
    expect(await h.tdb.db.area.findUniqueOrThrow({ where: { client_code: { client: 'default', code: 'AR-BAD' } } })).toEqual(rowBefore);
    expect([await parcels().batcher.waiting('AR-BAD'), (await parcels().batcher.rules(0)).get('AR-BAD')]).toEqual(groupBefore);
  });
});
