// Two clients with areas of one code and parcels of the same tracking numbers:
// each area is its client's (its vehicle, its sorter, its Redis group), each
// fills its own batches only (FULL at the batch size, TIMEOUT by the flusher,
// overdue ones by the reconciliation pass), each batch's notice goes to its
// own sorter, and one client's areas, parcels and batches are to the other as
// unknown ones (a second client's PUT /areas/B7 once rebound the first's).
import request, { type Agent } from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ServiceModule } from '../../../src/core/module.js';
import type { Batcher } from '../../../src/queue/index.js';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { sleep, waitFor } from '../../helpers/redis.js';
import { bearer, makeApiKey, startTestService, stopTestService, type TestService } from '../../helpers/service.js';

const SIZE = 3;
// Long enough that the first test's requests (a dozen, before the third parcel
// fills a group) end inside it on a machine several times slower than usual:
// a flush in between would make a TIMEOUT batch of two.
const MAX_WAIT_MS = 5_000;
/** The reconciliation test's own instance (API only: no flusher of its own) waits less. */
const OVERDUE_WAIT_MS = 1_000;
const B = 'client-b';
let tdb: TestDb;
let svc: TestService;
let keyB: string;

type Parcels = ServiceModule & {
  batcher: Batcher;
  reconcile: { run(): Promise<{ batches: number; parcels: number; regrouped: number }> };
  service: { recentBatches(limit: number, client?: string): Promise<{ id: string; client: string }[]> };
};

beforeAll(async () => {
  tdb = await createTestDb('parcels_clients');
  svc = await startTestService(tdb.url, {
    PARCEL_BATCH_SIZE: String(SIZE),
    PARCEL_MAX_WAIT_SECONDS: String(MAX_WAIT_MS / 1_000),
    PARCEL_RECONCILE_INTERVAL_SECONDS: '3600',
    PARCEL_RECONCILE_GRACE_SECONDS: '0',
    NOTIFY_RELAY_INTERVAL_SECONDS: '3600',
  });
  keyB = (await makeApiKey(tdb.url, undefined, 'b', B)).key;
});
afterAll(async () => stopTestService(svc, tdb));

/** The default client's agent (A) and client-b's (B), on one service. */
const a = () => svc.api();
const b = (): Agent => request.agent(svc.url).set(bearer(keyB));
const parcels = () => svc.module('parcels') as Parcels;

async function putArea(as: () => Agent, code: string, vehiclePlate: string, sorterContact: string): Promise<void> {
  const res = await as().put(`/areas/${code}`).send({ vehiclePlate, sorterContact });
  expect(res.status).toBe(200);
  expect(res.body).toEqual({ code, vehiclePlate, sorterContact, batchSize: null, maxWaitSeconds: null });
}

/** Every batch of area `code`, of both clients, with its parcels' clients and its notices. */
async function batchesOf(code: string) {
  const rows = await tdb.db.batch.findMany({ where: { areaCode: code }, include: { parcels: { select: { client: true, trackingNo: true } } } });
  const notes = await tdb.db.notification.findMany({ where: { batchId: { in: rows.map((r) => r.id) } } });
  return rows.map((r) => ({ ...r, notes: notes.filter((n) => n.batchId === r.id) }));
}

/** A problem answer with the asked id taken out of its text: what an unknown and another client's object must share. */
const shape = (res: request.Response, id: string) => ({ status: res.status, body: JSON.parse(JSON.stringify(res.body).replaceAll(id, '<id>')) as unknown });

describe('two clients with an area of one code', () => {
  it('each fills its own batches at the batch size, notified to its own sorter; neither touches the other', async () => {
    await putArea(a, 'B7', 'A-B7', 'sort-a@example.com');
    await putArea(b, 'B7', 'B-B7', 'sort-b@example.com');
    // B's PUT of B7 made B's own area: A's is as it was.
    expect((await a().get('/areas/B7')).body).toMatchObject({ code: 'B7', vehiclePlate: 'A-B7', sorterContact: 'sort-a@example.com' });
    expect((await b().get('/areas/B7')).body).toMatchObject({ code: 'B7', vehiclePlate: 'B-B7', sorterContact: 'sort-b@example.com' });

    // The same tracking numbers, interleaved: a shared group would be full at the third.
    for (const t of ['X1', 'X2']) {
      expect((await a().post('/parcels').send({ trackingNo: t, area: 'B7' })).status).toBe(202);
      expect((await b().post('/parcels').send({ trackingNo: t, area: 'B7' })).status).toBe(202);
    }
    // Each client's group in Redis: the default client's by the bare code (as before clients), B's naming B.
    expect((await parcels().batcher.waiting('B7')).count).toBe(2);
    expect((await parcels().batcher.waiting(`${B}/B7`)).count).toBe(2);
    expect((await a().get('/areas/B7')).body.waiting).toBe(2);
    expect((await b().get('/areas/B7')).body.waiting).toBe(2);

    const fullA = await a().post('/parcels').send({ trackingNo: 'X3', area: 'B7' });
    expect(fullA.status).toBe(202);
    expect(fullA.body.status).toBe('BATCHED');
    // A's batch took none of B's parcels: B's three are still waiting, and B's X1 is WAITING.
    expect((await b().get('/areas/B7')).body.waiting).toBe(2);
    expect((await b().get('/parcels/X1')).body).toMatchObject({ trackingNo: 'X1', status: 'WAITING', batchId: null });
    const fullB = await b().post('/parcels').send({ trackingNo: 'X3', area: 'B7' });
    expect(fullB.body.status).toBe('BATCHED');
    expect(fullB.body.batchId).not.toBe(fullA.body.batchId);

    // Each client's batch, parcels and notice are its own.
    const batches = await batchesOf('B7');
    expect(batches).toHaveLength(2);
    for (const [client, id, plate, sorter] of [
      ['default', fullA.body.batchId, 'A-B7', 'sort-a@example.com'],
      [B, fullB.body.batchId, 'B-B7', 'sort-b@example.com'],
    ] as const) {
      const batch = batches.find((x) => x.id === id)!;
      expect(batch).toMatchObject({ client, reason: 'FULL', vehiclePlate: plate, parcelCount: SIZE });
      expect(batch.parcels.map((p) => [p.client, p.trackingNo]).sort()).toEqual([
        [client, 'X1'],
        [client, 'X2'],
        [client, 'X3'],
      ]);
      expect(batch.notes.map((n) => [n.kind, n.client, n.recipient])).toEqual([['BATCH_DISPATCHED', client, sorter]]);
    }
    // Each client lists and reads its own.
    expect((await a().get('/batches?area=B7')).body.batches.map((x: { id: string }) => x.id)).toEqual([fullA.body.batchId]);
    expect((await b().get('/batches?area=B7')).body.batches.map((x: { id: string }) => x.id)).toEqual([fullB.body.batchId]);
    expect((await a().get('/parcels/X1')).body).toMatchObject({ status: 'BATCHED', batchId: fullA.body.batchId });
    expect((await b().get('/parcels/X1')).body).toMatchObject({ status: 'BATCHED', batchId: fullB.body.batchId });
    // A repeat of a tracking number the other client has is a repeat of the caller's own.
    expect((await b().post('/parcels').send({ trackingNo: 'X2', area: 'B7' })).body).toMatchObject({ batchId: fullB.body.batchId });
    // The operators' listing names each batch's client, and takes one.
    const recent = await parcels().service.recentBatches(10, B);
    expect(recent.map((x) => [x.id, x.client])).toEqual([[fullB.body.batchId, B]]);
  });

  it("answers another client's area, parcel and batch exactly as unknown ones, and changes nothing of them", async () => {
    await putArea(a, 'A-ONLY', 'A-1', 'sort-a1@example.com');
    for (const t of ['AO-1', 'AO-2', 'AO-3']) expect((await a().post('/parcels').send({ trackingNo: t, area: 'A-ONLY' })).status).toBe(202);
    const batchId = (await a().get('/parcels/AO-3')).body.batchId as string;
    expect(batchId).toEqual(expect.any(String));
    const unknownBatch = '00000000-0000-4000-8000-00000000b0b0';

    expect(shape(await b().get('/parcels/AO-1'), 'AO-1')).toEqual(shape(await b().get('/parcels/NONE-1'), 'NONE-1'));
    expect((await b().get('/parcels/AO-1')).body.code).toBe('PARCEL_NOT_FOUND');
    expect(shape(await b().get('/areas/A-ONLY'), 'A-ONLY')).toEqual(shape(await b().get('/areas/NONE'), 'NONE'));
    expect((await b().get('/areas/A-ONLY')).body.code).toBe('AREA_NOT_FOUND');
    expect(shape(await b().get(`/batches/${batchId}`), batchId)).toEqual(shape(await b().get(`/batches/${unknownBatch}`), unknownBatch));
    expect((await b().get(`/batches/${batchId}`)).body.code).toBe('BATCH_NOT_FOUND');
    expect((await b().get('/batches?area=A-ONLY')).body).toEqual({ batches: [] });

    // Intake into A's area code: B has no such area.
    const before = await tdb.db.parcel.count();
    const one = await b().post('/parcels').send({ trackingNo: 'BO-1', area: 'A-ONLY' });
    expect([one.status, one.body.code]).toEqual([422, 'UNKNOWN_AREA']);
    const many = await b()
      .post('/parcels/batch')
      .send({ parcels: [{ trackingNo: 'BO-2', area: 'A-ONLY' }] });
    expect(many.body.results.map((r: { error?: { code: string } }) => r.error?.code)).toEqual(['UNKNOWN_AREA']);
    expect(await tdb.db.parcel.count()).toBe(before);

    // B's PUT of that code makes B's own area; A's keeps its vehicle, sorter and batch.
    await putArea(b, 'A-ONLY', 'B-9', 'sort-b9@example.com');
    expect(await tdb.db.area.findUniqueOrThrow({ where: { client_code: { client: 'default', code: 'A-ONLY' } } })).toMatchObject({
      vehiclePlate: 'A-1',
      sorterContact: 'sort-a1@example.com',
    });
    expect((await a().get(`/batches/${batchId}`)).body).toMatchObject({ id: batchId, area: 'A-ONLY', vehiclePlate: 'A-1' });
    expect((await b().get('/areas/A-ONLY')).body).toMatchObject({ vehiclePlate: 'B-9', waiting: 0 });
  });

  it("makes each client's TIMEOUT batch of its own parcels at the maximum wait (the flusher)", async () => {
    await putArea(a, 'T9', 'A-T9', 'sort-at9@example.com');
    await putArea(b, 'T9', 'B-T9', 'sort-bt9@example.com');
    // One parcel each, of one tracking number, due together: one flush round likely commits both.
    await Promise.all([
      a().post('/parcels').send({ trackingNo: 'TO-1', area: 'T9' }).expect(202),
      b().post('/parcels').send({ trackingNo: 'TO-1', area: 'T9' }).expect(202),
    ]);
    expect(await waitFor(async () => (await tdb.db.parcel.count({ where: { areaCode: 'T9', status: 'WAITING' } })) === 0, 10 * MAX_WAIT_MS, 50)).toBe(true);
    const batches = await batchesOf('T9');
    expect(batches.map((x) => [x.client, x.reason, x.vehiclePlate, x.parcels.map((p) => `${p.client}:${p.trackingNo}`)]).sort()).toEqual([
      [B, 'TIMEOUT', 'B-T9', [`${B}:TO-1`]],
      ['default', 'TIMEOUT', 'A-T9', ['default:TO-1']],
    ]);
    for (const x of batches)
      expect(x.notes.map((n) => [n.client, n.recipient])).toEqual([[x.client, x.client === B ? 'sort-bt9@example.com' : 'sort-at9@example.com']]);
  });

  it("batches each client's overdue parcels apart in the reconciliation pass", async () => {
    // An API-only instance on its own keys: no flusher of its own races the test.
    const apiOnly = await startTestService(
      tdb.url,
      { PARCEL_BATCH_SIZE: String(SIZE), PARCEL_MAX_WAIT_SECONDS: String(OVERDUE_WAIT_MS / 1_000), PARCEL_RECONCILE_GRACE_SECONDS: '0' },
      'api',
    );
    try {
      const asA = () => apiOnly.api();
      const asB = () => request.agent(apiOnly.url).set(bearer(keyB));
      await putArea(asA, 'R7', 'A-R7', 'sort-ar7@example.com');
      await putArea(asB, 'R7', 'B-R7', 'sort-br7@example.com');
      for (const t of ['RO-1', 'RO-2']) {
        await asA().post('/parcels').send({ trackingNo: t, area: 'R7' }).expect(202);
        await asB().post('/parcels').send({ trackingNo: t, area: 'R7' }).expect(202);
      }
      await sleep(OVERDUE_WAIT_MS + 50);
      // A flusher takes both groups out of Redis and dies before committing them.
      const m = apiOnly.module('parcels') as Parcels;
      const taken = [];
      for (let shard = 0; shard < m.batcher.keys.length; shard++) taken.push(...(await m.batcher.takeDue(shard)).batches);
      expect(taken.map((x) => [x.group, x.items.map((i) => i.item).sort()]).sort()).toEqual([
        ['R7', ['RO-1', 'RO-2']],
        [`${B}/R7`, ['RO-1', 'RO-2']],
      ]);
      expect(await m.reconcile.run()).toEqual({ batches: 2, parcels: 4, regrouped: 0, rules: 0 });
      const batches = await batchesOf('R7');
      expect(batches.map((x) => [x.client, x.reason, x.vehiclePlate, x.parcels.map((p) => `${p.client}:${p.trackingNo}`).sort()]).sort()).toEqual([
        [B, 'TIMEOUT', 'B-R7', [`${B}:RO-1`, `${B}:RO-2`]],
        ['default', 'TIMEOUT', 'A-R7', ['default:RO-1', 'default:RO-2']],
      ]);
      for (const x of batches) expect(x.notes.map((n) => n.recipient)).toEqual([x.client === B ? 'sort-br7@example.com' : 'sort-ar7@example.com']);
    } finally {
      await stopTestService(apiOnly);
    }
  });
});
