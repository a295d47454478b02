// POST /parcels/:trackingNo/withdraw and /move: a withdrawn parcel leaves its
// Redis group and ends in no batch (raced against the manual flush, the FULL
// add and the timeout flush), a moved one waits in its new area from its
// first arrival; refusals (batched, withdrawn, unknown, bad input) write nothing.
import { describe, expect, it } from 'vitest';
import { createParcelsRepository } from '../../../src/modules/parcels/parcels.repository.js';
import { sleep, waitFor } from '../../helpers/redis.js';
import { useParcelsService } from './parcels.harness.js';
import { expectBatchRules } from './parcels.invariants.js';

const h = useParcelsService('parcels_withdraw', { PARCEL_BATCH_SIZE: '3', PARCEL_MAX_WAIT_SECONDS: '600' });
const { area: put, post, flush, withdraw, move, row, inGroup, batcher } = h;

describe('withdraw', () => {
  it('takes a waiting parcel out of its group: WITHDRAWN, again the same, in no batch after', async () => {
    await put('WD-1');
    for (const t of ['WD1-A', 'WD1-B']) await post(t, 'WD-1').expect(202);
    const res = await withdraw('WD1-A').expect(200);
    expect(res.body).toMatchObject({ trackingNo: 'WD1-A', area: 'WD-1', status: 'WITHDRAWN', batchId: null });
    expect((await withdraw('WD1-A').expect(200)).body).toEqual(res.body);
    expect(await inGroup('WD-1', 'WD1-A')).toBe(false);
    expect(await batcher().waiting('WD-1')).toMatchObject({ count: 1, firstArrival: (await row('WD1-B')).createdAt.getTime() });
    expect((await h.svc.api().get('/areas/WD-1')).body).toMatchObject({ waiting: 1 });
    // The next two fill the group without it.
    await post('WD1-C', 'WD-1').expect(202);
    expect((await post('WD1-D', 'WD-1').expect(202)).body.status).toBe('BATCHED');
    expect((await row('WD1-A')).status).toBe('WITHDRAWN');
    const batch = await h.tdb.db.batch.findFirstOrThrow({ where: { areaCode: 'WD-1' }, include: { parcels: true } });
    expect(batch.parcels.map((p) => p.trackingNo).sort()).toEqual(['WD1-B', 'WD1-C', 'WD1-D']);
    expect(await batcher().waiting('WD-1')).toMatchObject({ count: 0 });
  });

  it('is refused once batched (409 ALREADY_BATCHED), for an unknown parcel (404) and a bad tracking number (400)', async () => {
    await put('WD-2');
    for (const t of ['WD2-A', 'WD2-B', 'WD2-C']) await post(t, 'WD-2').expect(202);
    expect((await withdraw('WD2-A')).body).toMatchObject({ status: 409, code: 'ALREADY_BATCHED' });
    expect((await row('WD2-A')).status).toBe('BATCHED');
    expect((await withdraw('WD2-NONE')).body).toMatchObject({ status: 404, code: 'PARCEL_NOT_FOUND' });
    expect((await withdraw(' lead')).body).toMatchObject({ status: 400, code: 'INVALID_TRACKING_NO' });
  });

  it('a batch commit never takes a withdrawn parcel, even one its Redis group still holds', async () => {
    await put('WD-3');
    for (const t of ['WD3-A', 'WD3-B', 'WD3-C']) {
      await post(t, 'WD-3').expect(202);
      if (t !== 'WD3-C') await batcher().remove('WD-3', [t]); // none of them fills the group
    }
    await withdraw('WD3-A').expect(200);
    // A FULL take made before the withdraw (a stale entry) still names it.
    const { committed } = await createParcelsRepository(h.tdb.db).commitBatches(
      [{ id: crypto.randomUUID(), client: 'default', areaCode: 'WD-3', trackingNos: ['WD3-A', 'WD3-B', 'WD3-C'] }],
      'FULL',
      { batchSize: 3, maxWaitMs: 600_000 },
    );
    expect(committed).toEqual([]);
    expect((await row('WD3-A')).status).toBe('WITHDRAWN');
  });
});

describe('withdraw racing', () => {
  it('the manual flush, the FULL add and the timeout flush: a withdrawn parcel in no batch, none above the size', async () => {
    const codes: string[] = [];
    const outcomes: Record<string, number> = {};
    for (let round = 0; round < 18; round++) {
      const code = `WR-${round}`;
      codes.push(code);
      const kind = round % 3; // 0: manual flush, 1: FULL add, 2: timeout flush
      await put(code, kind === 2 ? { maxWaitSeconds: 1 } : {});
      for (let i = 0; i < 2; i++) await post(`${code}-${i}`, code).expect(202);
      if (kind === 2) await sleep(Math.max(0, (await row(`${code}-0`)).createdAt.getTime() + 1_000 - Date.now() - round));
      const other = kind === 0 ? flush(code) : kind === 1 ? post(`${code}-2`, code) : sleep(0);
      const [w] = await Promise.all([withdraw(`${code}-0`), other]);
      outcomes[`${kind}:${w.status}`] = (outcomes[`${kind}:${w.status}`] ?? 0) + 1;
      if (w.status === 200) expect(w.body.status).toBe('WITHDRAWN');
      else expect(w.body.code).toBe('ALREADY_BATCHED');
    }
    // Let the timeout flushes and any put back settle, then flush what is left.
    await sleep(1_500);
    for (const code of codes) if ((await h.tdb.db.parcel.count({ where: { areaCode: code, status: 'WAITING' } })) > 0) await flush(code);
    await expectBatchRules(h.tdb, Object.fromEntries(codes.map((c) => [c, 3])));
    for (const code of codes) {
      const p = await row(`${code}-0`);
      expect(p.status === 'WITHDRAWN' ? p.batchId : 'batched', `${code}-0`).toBe(p.status === 'WITHDRAWN' ? null : 'batched');
      expect(await inGroup(code, `${code}-0`)).toBe(false);
    }
    expect(Object.keys(outcomes).length).toBeGreaterThan(1);
  });
});

describe('move', () => {
  it('moves a waiting parcel to another area, arrival kept, out of the old group into the new', async () => {
    await put('MV-1');
    await put('MV-2', { batchSize: 5 });
    await post('MV1-A', 'MV-1').expect(202);
    await post('MV1-B', 'MV-1').expect(202);
    const arrival = (await row('MV1-A')).createdAt.getTime();
    const res = await move('MV1-A', { area: 'MV-2' }).expect(200);
    expect(res.body).toMatchObject({ trackingNo: 'MV1-A', area: 'MV-2', status: 'WAITING', createdAt: new Date(arrival).toISOString() });
    expect(await inGroup('MV-1', 'MV1-A')).toBe(false);
    expect(await batcher().waiting('MV-2')).toEqual({ count: 1, firstArrival: arrival, deadline: arrival + 600_000 });
    expect((await move('MV1-A', { area: 'MV-2' }).expect(200)).body).toEqual(res.body);
  });

  it('completes the new area batch (FULL), and a short wait there flushes it by its first arrival', async () => {
    await put('MV-3');
    await put('MV-4', { batchSize: 2 });
    await post('MV3-A', 'MV-3').expect(202);
    await post('MV4-A', 'MV-4').expect(202);
    const moved = await move('MV3-A', { area: 'MV-4' }).expect(200);
    expect(moved.body.status).toBe('BATCHED');
    const b = await h.tdb.db.batch.findUniqueOrThrow({ where: { id: moved.body.batchId }, include: { parcels: true } });
    expect([b.reason, b.areaCode, b.parcels.map((p) => p.trackingNo).sort()]).toEqual(['FULL', 'MV-4', ['MV3-A', 'MV4-A']]);

    await put('MV-5', { maxWaitSeconds: 1 });
    await post('MV5-OLD', 'MV-3').expect(202);
    await sleep(1_100);
    await move('MV5-OLD', { area: 'MV-5' }).expect(200);
    expect(await waitFor(async () => (await row('MV5-OLD')).status === 'BATCHED', 10_000, 50)).toBe(true);
    expect((await h.tdb.db.batch.findUniqueOrThrow({ where: { id: (await row('MV5-OLD')).batchId! } })).reason).toBe('TIMEOUT');
  });

  it('two opposite moves racing (to B and to A): the parcel ends in the group of the area its row says, and in no other', async () => {
    await put('MO-A', { batchSize: 50 });
    await put('MO-B', { batchSize: 50 });
    const names = Array.from({ length: 24 }, (_, i) => `MO-${i}`);
    for (const [i, t] of names.entries()) await post(t, i % 2 ? 'MO-B' : 'MO-A').expect(202);
    for (let round = 0; round < 3; round++) {
      // Each parcel moved to both areas at once; which commit lands last decides where it waits.
      await Promise.all(names.flatMap((t) => [move(t, { area: 'MO-B' }), move(t, { area: 'MO-A' })]));
      for (const t of names) {
        const p = await row(t);
        expect(p.status, t).toBe('WAITING');
        const other = p.areaCode === 'MO-A' ? 'MO-B' : 'MO-A';
        expect([await inGroup(p.areaCode, t), await inGroup(other, t)], `${t} of ${p.areaCode}`).toEqual([true, false]);
      }
    }
    const counts = [await batcher().waiting('MO-A'), await batcher().waiting('MO-B')].map((w) => w.count);
    expect(counts).toEqual([
      await h.tdb.db.parcel.count({ where: { areaCode: 'MO-A', status: 'WAITING' } }),
      await h.tdb.db.parcel.count({ where: { areaCode: 'MO-B', status: 'WAITING' } }),
    ]);
  });

  it('is refused for a batched (409), a withdrawn (409) or unknown parcel (404), an unknown area (404), bad input (400); nothing written', async () => {
    await put('MV-6');
    for (const t of ['MV6-A', 'MV6-B', 'MV6-C']) await post(t, 'MV-6').expect(202);
    await post('MV6-W', 'MV-3').expect(202);
    await post('MV6-X', 'MV-3').expect(202);
    await withdraw('MV6-W').expect(200);
    const before = await h.tdb.db.parcel.findMany({ where: { trackingNo: { in: ['MV6-A', 'MV6-W', 'MV6-X'] } }, orderBy: { trackingNo: 'asc' } });
    const groupsBefore = [await batcher().waiting('MV-3'), await batcher().waiting('MV-1')];
    const cases: [string, unknown, number, string][] = [
      ['MV6-A', { area: 'MV-1' }, 409, 'ALREADY_BATCHED'],
      ['MV6-W', { area: 'MV-1' }, 409, 'PARCEL_WITHDRAWN'],
      ['MV6-NONE', { area: 'MV-1' }, 404, 'PARCEL_NOT_FOUND'],
      ['MV6-X', { area: 'MV-NONE' }, 404, 'AREA_NOT_FOUND'],
      ['MV6-X', { area: 'a:b' }, 400, 'VALIDATION_FAILED'],
      ['MV6-X', { area: '' }, 400, 'VALIDATION_FAILED'],
      ['MV6-X', {}, 400, 'VALIDATION_FAILED'],
      ['MV6-X', { area: 'MV-1', batchSize: 3 }, 400, 'VALIDATION_FAILED'],
      ['MV6-X', { area: 7 }, 400, 'VALIDATION_FAILED'],
      [' lead', { area: 'MV-1' }, 400, 'INVALID_TRACKING_NO'],
    ];
    for (const [t, body, status, code] of cases) expect((await move(t, body)).body, `${t} ${JSON.stringify(body)}`).toMatchObject({ status, code });
    expect(await h.tdb.db.parcel.findMany({ where: { trackingNo: { in: ['MV6-A', 'MV6-W', 'MV6-X'] } }, orderBy: { trackingNo: 'asc' } })).toEqual(before);
    expect([await batcher().waiting('MV-3'), await batcher().waiting('MV-1')]).toEqual(groupsBefore);
  });
});
