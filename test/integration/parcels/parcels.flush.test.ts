// POST /areas/:code/flush: a MANUAL batch of what waits now, answered as
// GET /batches/:id answers it; 409 NOTHING_WAITING on an empty area; never
// more than the area's size (the oldest go, the rest keep waiting); and raced
// against the FULL add and the timeout flush, every parcel ends in at most one
// batch, never above its area's size.
import { describe, expect, it } from 'vitest';
import { sleep, waitFor } from '../../helpers/redis.js';
import { makeApiKey } from '../../helpers/service.js';
import { useParcelsService } from './parcels.harness.js';
import { expectBatchRules } from './parcels.invariants.js';

const h = useParcelsService('parcels_flush', { PARCEL_BATCH_SIZE: '4', PARCEL_MAX_WAIT_SECONDS: '600' });
const { area: put, post, flush, row } = h;
const parcels = h.batcher;

describe('a manual flush', () => {
  it('makes a MANUAL batch of what waits, answered as GET /batches/:id, and empties the Redis group', async () => {
    await put('FL-1');
    for (const t of ['FL1-A', 'FL1-B']) await post(t, 'FL-1').expect(202);
    const res = await flush('FL-1').expect(200);
    expect(res.body).toMatchObject({ area: 'FL-1', vehiclePlate: 'V-FL-1', reason: 'MANUAL', parcels: ['FL1-A', 'FL1-B'] });
    expect((await h.svc.api().get(`/batches/${res.body.id}`).expect(200)).body).toEqual(res.body);
    expect(await parcels().waiting('FL-1')).toEqual({ count: 0, firstArrival: null, deadline: null });
    expect((await row('FL1-A')).batchId).toBe(res.body.id);
    const note = await h.tdb.db.notification.findFirstOrThrow({ where: { batchId: res.body.id } });
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
    await expectBatchRules(h.tdb, { 'FL-2': 3 });
  });

  it('answers 404 for an unknown area, 400 for a bad code, 403 without areas:write, and writes nothing', async () => {
    expect((await flush('FL-NONE')).body.code).toBe('AREA_NOT_FOUND');
    expect((await h.svc.api().post('/areas/a:b/flush')).body.code).toBe('INVALID_AREA_CODE');
    await put('FL-3');
    await post('FL3-A', 'FL-3').expect(202);
    const { key } = await makeApiKey(h.tdb.url, ['parcels:write', 'parcels:read'], 'no-areas');
    const res = await fetch(`${h.svc.url}/areas/FL-3/flush`, { method: 'POST', headers: { authorization: `Bearer ${key}` } });
    expect(res.status).toBe(403);
    expect((await row('FL3-A')).status).toBe('WAITING');
    expect((await parcels().waiting('FL-3')).count).toBe(1);
  });
});

describe('a flush under an Idempotency-Key', () => {
  it('answers a retry with the batch the first one made; the key with another area 422; without a key a second flush 409', async () => {
    await put('FK-1');
    await put('FK-2');
    for (const t of ['FK1-A', 'FK1-B']) await post(t, 'FK-1').expect(202);
    const first = await flush('FK-1', 'fk-1').expect(200);
    expect(first.body).toMatchObject({ reason: 'MANUAL', parcels: ['FK1-A', 'FK1-B'] });
    // Another parcel waits now: the retry still answers the first batch, and leaves it waiting.
    await post('FK1-C', 'FK-1').expect(202);
    expect((await flush('FK-1', 'fk-1').expect(200)).body).toEqual(first.body);
    expect((await row('FK1-C')).status).toBe('WAITING');
    expect((await h.batchesOf('FK-1')).length).toBe(1);
    const reused = await flush('FK-2', 'fk-1');
    expect([reused.status, reused.body.code]).toEqual([422, 'IDEMPOTENCY_KEY_REUSED']);
    // Without a key: a flush of what waits, then 409 as before.
    expect((await flush('FK-1').expect(200)).body.parcels).toEqual(['FK1-C']);
    expect((await flush('FK-1')).body).toMatchObject({ status: 409, code: 'NOTHING_WAITING' });
    // A key whose flush found nothing is not spent: once a parcel waits, a flush under it makes its batch.
    expect((await flush('FK-1', 'fk-2')).body).toMatchObject({ status: 409, code: 'NOTHING_WAITING' });
    await post('FK1-D', 'FK-1').expect(202);
    expect((await flush('FK-1', 'fk-2').expect(200)).body.parcels).toEqual(['FK1-D']);
    expect(await h.tdb.db.batch.count({ where: { areaCode: 'FK-2' } })).toBe(0);
  });

  it('two flushes racing under one key make one batch, and both answer it', async () => {
    for (let round = 0; round < 6; round++) {
      const code = `FKR-${round}`;
      await put(code);
      for (let i = 0; i < 3; i++) await post(`${code}-${i}`, code).expect(202);
      const [a, b] = await Promise.all([flush(code, `race-${code}`), flush(code, `race-${code}`)]);
      expect([a.status, b.status], JSON.stringify([a.body, b.body])).toEqual([200, 200]);
      expect(a.body).toEqual(b.body);
      expect((await h.batchesOf(code)).length).toBe(1);
    }
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
    const reasons = await expectBatchRules(h.tdb, sizes);
    expect(reasons.MANUAL).toBeGreaterThan(0);
    expect(await h.tdb.db.parcel.count({ where: { areaCode: { in: Object.keys(sizes) }, status: 'WAITING' } })).toBe(0);
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
    expect(await waitFor(async () => (await h.tdb.db.parcel.count({ where: { areaCode: { in: codes }, status: 'WAITING' } })) === 0, 15_000, 50)).toBe(true);
    const reasons = await expectBatchRules(h.tdb, Object.fromEntries(codes.map((c) => [c, 4])));
    expect((reasons.MANUAL ?? 0) + (reasons.TIMEOUT ?? 0)).toBeGreaterThanOrEqual(8);
  });
});
