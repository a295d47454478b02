// POST /parcels/batch: up to 1 000 parcels in one request, one statement for
// all of them, a result per parcel in order, a refused parcel never failing
// the others, and every parcel in exactly one batch afterwards.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { waitFor } from '../../helpers/redis.js';
import { startTestService, stopTestService, type TestService } from '../../helpers/service.js';

let tdb: TestDb;
let svc: TestService;

beforeAll(async () => {
  tdb = await createTestDb('parcels_batch_intake');
  svc = await startTestService(tdb.url, {
    PARCEL_BATCH_SIZE: '10',
    PARCEL_MAX_WAIT_SECONDS: '1',
    PARCEL_RECONCILE_INTERVAL_SECONDS: '3600',
    NOTIFY_RELAY_INTERVAL_SECONDS: '3600',
  });
  for (const code of ['bi-east', 'bi-west', 'bi-big']) {
    const res = await svc
      .api()
      .put(`/areas/${code}`)
      .send({ vehiclePlate: 'B-1', sorterContact: `sort-${code}@example.com` });
    expect(res.status).toBe(200);
  }
});
afterAll(async () => {
  await stopTestService(svc, tdb);
});

type Result = { trackingNo?: string; area?: string; status?: string; batchId?: string | null; created?: boolean; error?: { code: string } };

describe('batch intake', () => {
  it('answers each parcel in order: taken in, a repeat, or refused alone', async () => {
    expect((await svc.api().post('/parcels').send({ trackingNo: 'BI-OLD', area: 'bi-west' })).status).toBe(202);
    const parcels = [
      ...Array.from({ length: 25 }, (_, i) => ({ trackingNo: `BI-E${i}`, area: 'bi-east' })),
      { trackingNo: 'BI-X1', area: 'nowhere' }, // 25: unknown area
      { trackingNo: ' bad', area: 'bi-east' }, // 26: invalid tracking number
      { trackingNo: 'BI-X2', area: 'no spaces' }, // 27: invalid area code
      { trackingNo: 'BI-X3', area: 'bi-east', extra: 1 }, // 28: not a parcel
      { trackingNo: 'BI-OLD', area: 'bi-east' }, // 29: posted before, for another area
      { trackingNo: 'BI-OLD', area: 'bi-west' }, // 30: posted before, same area: a repeat
      { trackingNo: 'BI-E0', area: 'bi-east' }, // 31: twice in this request
    ];
    const res = await svc.api().post('/parcels/batch').send({ parcels });
    expect(res.status).toBe(200);
    const results = res.body.results as Result[];
    expect(results).toHaveLength(parcels.length);
    for (let i = 0; i < 25; i++) expect(results[i]).toMatchObject({ trackingNo: `BI-E${i}`, area: 'bi-east', created: true });
    expect(results.slice(25, 31).map((r) => r.error?.code)).toEqual([
      'UNKNOWN_AREA',
      'INVALID_TRACKING_NO',
      'INVALID_AREA_CODE',
      'INVALID_PARCEL',
      'TRACKING_NO_CONFLICT',
      undefined,
    ]);
    expect(results[30]).toMatchObject({ trackingNo: 'BI-OLD', area: 'bi-west', created: false });
    expect(results[31]).toMatchObject({ trackingNo: 'BI-E0', area: 'bi-east', created: false });
    // 25 in one area at a batch size of 10: two FULL batches at once, as the answer already says.
    const batched = results.slice(0, 25).filter((r) => r.status === 'BATCHED');
    expect(batched).toHaveLength(20);
    expect(new Set(batched.map((r) => r.batchId)).size).toBe(2);
    expect(await tdb.db.parcel.count({ where: { trackingNo: { in: ['BI-X1', 'BI-X2', 'BI-X3', ' bad'] } } })).toBe(0);
    // The last five go at the maximum wait: every parcel in exactly one batch.
    expect(await waitFor(async () => (await tdb.db.parcel.count({ where: { areaCode: 'bi-east', status: 'WAITING' } })) === 0, 10_000)).toBe(true);
    const rows = await tdb.db.parcel.findMany({ where: { areaCode: 'bi-east' }, select: { batchId: true } });
    expect(rows).toHaveLength(25);
    const sizes = await tdb.db.batch.findMany({ where: { areaCode: 'bi-east' }, select: { parcelCount: true, reason: true } });
    expect(sizes.map((b) => b.parcelCount).sort()).toEqual([10, 10, 5]);
  });

  it('takes 1 000 parcels over many areas at once, each batched exactly once', async () => {
    const areas = Array.from({ length: 7 }, (_, i) => `bi-a${i}`);
    for (const code of areas)
      await svc
        .api()
        .put(`/areas/${code}`)
        .send({ vehiclePlate: 'B-2', sorterContact: `sort-${code}@example.com` });
    const parcels = Array.from({ length: 1_000 }, (_, i) => ({ trackingNo: `BI-M${i}-${'x'.repeat(50)}`, area: areas[i % areas.length] as string }));
    const res = await svc.api().post('/parcels/batch').send({ parcels });
    expect(res.status).toBe(200);
    expect((res.body.results as Result[]).every((r) => r.created === true)).toBe(true);
    const all = { areaCode: { in: areas } };
    expect(await waitFor(async () => (await tdb.db.parcel.count({ where: { ...all, status: 'WAITING' } })) === 0, 15_000)).toBe(true);
    const batches = await tdb.db.batch.findMany({ where: all, select: { id: true, parcelCount: true } });
    expect(batches.reduce((n, b) => n + b.parcelCount, 0)).toBe(1_000);
    expect(await tdb.db.parcel.count({ where: { ...all, batchId: { in: batches.map((b) => b.id) } } })).toBe(1_000);
  });

  it('takes two requests sharing parcels in opposite orders side by side, each parcel once (no deadlock)', async () => {
    for (let round = 0; round < 3; round++) {
      const parcels = Array.from({ length: 400 }, (_, i) => ({ trackingNo: `BI-R${round}-${i}`, area: 'bi-west' }));
      const [a, b] = await Promise.all([
        svc.api().post('/parcels/batch').send({ parcels }),
        svc
          .api()
          .post('/parcels/batch')
          .send({ parcels: [...parcels].reverse() }),
      ]);
      expect([a.status, b.status]).toEqual([200, 200]);
      const created = [...(a.body.results as Result[]), ...(b.body.results as Result[])].filter((r) => r.created === true);
      expect(created).toHaveLength(400);
    }
  });

  it('refuses a request that is not a list of 1 to 1 000 parcels, writing nothing', async () => {
    for (const body of [
      {},
      { parcels: [] },
      { parcels: 'x' },
      { parcels: Array.from({ length: 1_001 }, (_, i) => ({ trackingNo: `BI-N${i}`, area: 'bi-big' })) },
    ]) {
      const res = await svc.api().post('/parcels/batch').send(body);
      expect(res.status).toBe(400);
      expect(res.headers['content-type']).toMatch(/application\/problem\+json/);
      expect(res.body.code).toBe('VALIDATION_FAILED');
    }
    expect(await tdb.db.parcel.count({ where: { areaCode: 'bi-big' } })).toBe(0);
  });

  it('shares one INSERT among concurrent single intakes, each answered as its own', async () => {
    const res = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        svc
          .api()
          .post('/parcels')
          .send({ trackingNo: `BI-C${i % 30}`, area: i < 35 ? 'bi-big' : 'bi-west' }),
      ),
    );
    // 30 distinct tracking numbers: each new once; its repeats in the same area answered 200, in another area 409.
    expect(res.filter((r) => r.status === 202)).toHaveLength(30);
    for (const r of res) expect([200, 202, 409]).toContain(r.status);
    expect(await tdb.db.parcel.count({ where: { trackingNo: { startsWith: 'BI-C' } } })).toBe(30);
  });
});
