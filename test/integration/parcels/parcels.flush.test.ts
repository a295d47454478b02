// POST /areas/:code/flush: a MANUAL batch of what waits now, answered as
// GET /batches/:id answers it; 409 NOTHING_WAITING on an empty area; never
// more than the area's size (the oldest go, the rest keep waiting); and raced
// against the FULL add and the timeout flush, every parcel ends in at most one
// batch, never above its area's size.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ServiceModule } from '../../../src/core/module.js';
import type { Batcher } from '../../../src/queue/index.js';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { sleep, waitFor } from '../../helpers/redis.js';
import { makeApiKey, startTestService, stopTestService, type TestService } from '../../helpers/service.js';
import { expectBatchRules } from './parcels.invariants.js';

let tdb: TestDb;
let svc: TestService;
const parcels = () => (svc.module('parcels') as ServiceModule & { batcher: Batcher }).batcher;

beforeAll(async () => {
  tdb = await createTestDb('parcels_flush');
  svc = await startTestService(tdb.url, {
    PARCEL_BATCH_SIZE: '4',
    PARCEL_MAX_WAIT_SECONDS: '600',
    PARCEL_RECONCILE_INTERVAL_SECONDS: '3600',
    PARCEL_RECONCILE_GRACE_SECONDS: '0',
  });
});
afterAll(async () => stopTestService(svc, tdb));

const put = (code: string, rule: Record<string, unknown> = {}) =>
  svc
    .api()
    .put(`/areas/${code}`)
    .send({ vehiclePlate: `V-${code}`.slice(0, 16), sorterContact: 'flush@example.com', ...rule })
    .expect(200);
const post = (trackingNo: string, area: string) => svc.api().post('/parcels').send({ trackingNo, area });
const flush = (code: string) => svc.api().post(`/areas/${code}/flush`);
const row = (t: string) => tdb.db.parcel.findUniqueOrThrow({ where: { client_trackingNo: { client: 'default', trackingNo: t } } });

describe('a manual flush', () => {
  it('makes a MANUAL batch of what waits, answered as GET /batches/:id, and empties the Redis group', async () => {
    await put('FL-1');
    for (const t of ['FL1-A', 'FL1-B']) await post(t, 'FL-1').expect(202);
    const res = await flush('FL-1').expect(200);
    expect(res.body).toMatchObject({ area: 'FL-1', vehiclePlate: 'V-FL-1', reason: 'MANUAL', parcels: ['FL1-A', 'FL1-B'] });
    expect((await svc.api().get(`/batches/${res.body.id}`).expect(200)).body).toEqual(res.body);
    expect(await parcels().waiting('FL-1')).toEqual({ count: 0, firstArrival: null, deadline: null });
    expect((await row('FL1-A')).batchId).toBe(res.body.id);
    const note = await tdb.db.notification.findFirstOrThrow({ where: { batchId: res.body.id } });
    expect(note.payload).toMatchObject({ reason: 'MANUAL', parcels: 2 });
    // Nothing waits now.
    const again = await flush('FL-1');
    expect([again.status, again.body.code]).toEqual([409, 'NOTHING_WAITING']);
  });

  it('takes the oldest up to the area size; the rest keep waiting', async () => {
    await put('FL-2', { batchSize: 3 });
    // Five waiting by the database, none taken by Redis (they were removed from the group as if a take were in flight).
    for (const t of ['FL2-1', 'FL2-2', 'FL2-3', 'FL2-4', 'FL2-5']) {
      await post(t, 'FL-2').expect(202);
      await parcels().remove('FL-2', [t]);
      await sleep(3);
    }
    const res = await flush('FL-2').expect(200);
    expect(res.body.parcels).toEqual(['FL2-1', 'FL2-2', 'FL2-3']);
    expect((await row('FL2-4')).status).toBe('WAITING');
    expect((await flush('FL-2').expect(200)).body.parcels).toEqual(['FL2-4', 'FL2-5']);
    await expectBatchRules(tdb, { 'FL-2': 3 });
  });

  it('answers 404 for an unknown area, 400 for a bad code, 403 without areas:write, and writes nothing', async () => {
    expect((await flush('FL-NONE')).body.code).toBe('AREA_NOT_FOUND');
    expect((await svc.api().post('/areas/a:b/flush')).body.code).toBe('INVALID_AREA_CODE');
    await put('FL-3');
    await post('FL3-A', 'FL-3').expect(202);
    const { key } = await makeApiKey(tdb.url, ['parcels:write', 'parcels:read'], 'no-areas');
    const res = await fetch(`${svc.url}/areas/FL-3/flush`, { method: 'POST', headers: { authorization: `Bearer ${key}` } });
    expect(res.status).toBe(403);
    expect((await row('FL3-A')).status).toBe('WAITING');
    expect((await parcels().waiting('FL-3')).count).toBe(1);
  });
});

describe('a flush racing', () => {
  it('the FULL add: every parcel in at most one batch, none above the size', async () => {
    for (let round = 0; round < 12; round++) {
      const code = `FR-${round}`;
      await put(code);
      for (let i = 0; i < 3; i++) await post(`${code}-${i}`, code).expect(202);
      // The fourth parcel fills the group (a FULL take) while the flush takes what waits.
      const [added, flushed] = await Promise.all([post(`${code}-3`, code), flush(code)]);
      expect(added.status).toBe(202);
      expect([200, 409]).toContain(flushed.status);
    }
    // Parcels a refused FULL take left waiting are put back: flush them, then nothing waits.
    for (let round = 0; round < 12; round++) if ((await parcels().waiting(`FR-${round}`)).count > 0) await flush(`FR-${round}`);
    const sizes = Object.fromEntries(Array.from({ length: 12 }, (_, r) => [`FR-${r}`, 4]));
    const reasons = await expectBatchRules(tdb, sizes);
    expect(reasons.MANUAL).toBeGreaterThan(0);
    expect(await tdb.db.parcel.count({ where: { areaCode: { in: Object.keys(sizes) }, status: 'WAITING' } })).toBe(0);
  });

  it('the timeout flush: every parcel in exactly one batch, none above the size', async () => {
    const codes: string[] = [];
    for (let round = 0; round < 8; round++) {
      const code = `FT-${round}`;
      codes.push(code);
      await put(code, { maxWaitSeconds: 1 });
      for (let i = 0; i < 2; i++) await post(`${code}-${i}`, code).expect(202);
    }
    // Flushes spread around the groups' deadlines (a second after their first arrival).
    const first = (await row('FT-0-0')).createdAt.getTime();
    await sleep(Math.max(0, first + 900 - Date.now()));
    const answers = await Promise.all(codes.map(async (code, i) => (await sleep(i * 30), flush(code))));
    for (const a of answers) expect([200, 409]).toContain(a.status);
    expect(await waitFor(async () => (await tdb.db.parcel.count({ where: { areaCode: { in: codes }, status: 'WAITING' } })) === 0, 15_000, 50)).toBe(true);
    const reasons = await expectBatchRules(tdb, Object.fromEntries(codes.map((c) => [c, 4])));
    expect((reasons.MANUAL ?? 0) + (reasons.TIMEOUT ?? 0)).toBeGreaterThanOrEqual(8);
  });
});
