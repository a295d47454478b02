// Parcel batching through HTTP: full batches at the batch size, a timeout batch
// at the maximum wait, idempotent intake, the crash window repaired by the
// reconciliation pass, and bad input refused without writes.
import type { Test } from 'supertest';
import type { RedisClient } from '../../../src/core/redis.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { redisClient, sleep, waitFor } from '../../helpers/redis.js';
import { startTestService, stopTestService, type TestService } from '../../helpers/service.js';

let tdb: TestDb;
let svc: TestService;
let redis: RedisClient;

beforeAll(async () => {
  tdb = await createTestDb('parcels_api');
  svc = await startTestService(tdb.url, {
    PARCEL_BATCH_SIZE: '10',
    PARCEL_MAX_WAIT_SECONDS: '1',
    PARCEL_RECONCILE_INTERVAL_SECONDS: '3600',
    PARCEL_RECONCILE_GRACE_SECONDS: '0',
    NOTIFY_RELAY_INTERVAL_SECONDS: '3600',
  });
  redis = redisClient('parcels-api-test');
});
afterAll(async () => {
  redis.disconnect();
  await stopTestService(svc, tdb);
});

const api = () => svc.api();
type ParcelsModule = {
  batcher: { takeDue(shard: number): Promise<{ batches: { group: string; items: { item: string }[] }[] }> };
  reconcile: { run(): Promise<{ batches: number; parcels: number }> };
};
let seq = 0;
const tn = (area: string) => `${area}-T${++seq}`;

async function area(code: string) {
  const res = await api()
    .put(`/areas/${code}`)
    .send({ vehiclePlate: `沪A-${code}`.slice(0, 16), sorterContact: `sort-${code}@example.com` });
  expect(res.status).toBe(200);
  return res.body;
}

describe('batching', () => {
  it('25 parcels: two FULL batches of 10 at once, then a TIMEOUT batch of 5 after the max wait', async () => {
    await area('north');
    const posted: { status: number; body: { trackingNo: string; status: string; batchId: string | null } }[] = [];
    for (let i = 0; i < 25; i++)
      posted.push(
        await api()
          .post('/parcels')
          .send({ trackingNo: tn('north'), area: 'north' }),
      );
    expect(posted.every((p) => p.status === 202)).toBe(true);
    // The 10th and 20th parcel completed a batch and come back BATCHED.
    expect(posted[9]!.body.status).toBe('BATCHED');
    expect(posted[19]!.body.status).toBe('BATCHED');
    expect(posted[24]!.body.status).toBe('WAITING');
    const lastPostedAt = Date.now();
    const full = await api().get('/batches?area=north');
    expect(full.body.batches.map((b: { reason: string; parcels: string[] }) => [b.reason, b.parcels.length])).toEqual([
      ['FULL', 10],
      ['FULL', 10],
    ]);
    const areaNow = await api().get('/areas/north');
    expect(areaNow.body).toMatchObject({ code: 'north', waiting: 5 });
    expect(areaNow.body.firstArrivalAt).not.toBeNull();

    expect(await waitFor(async () => (await api().get('/batches?area=north')).body.batches.length === 3, 3_000, 20)).toBe(true);
    const all = (await api().get('/batches?area=north')).body.batches as {
      id: string;
      reason: string;
      parcels: string[];
      vehiclePlate: string;
      createdAt: string;
    }[];
    const timeout = all[0]!;
    expect(timeout.reason).toBe('TIMEOUT');
    expect(timeout.parcels).toEqual(posted.slice(20).map((p) => p.body.trackingNo));
    expect(timeout.vehiclePlate).toBe('沪A-north');
    const firstOfFive = await tdb.db.parcel.findUniqueOrThrow({ where: { client_trackingNo: { client: 'default', trackingNo: timeout.parcels[0]! } } });
    const waited = Date.parse(timeout.createdAt) - firstOfFive.createdAt.getTime();
    expect(waited).toBeGreaterThanOrEqual(1_000 - 5);
    expect(waited).toBeLessThan(1_000 + 500);
    expect(Date.now() - lastPostedAt).toBeGreaterThan(0);
    // Every parcel in exactly one batch, in order, and each batch announced to the sorters.
    expect(all.flatMap((b) => b.parcels).sort()).toEqual(posted.map((p) => p.body.trackingNo).sort());
    const one = await api().get(`/parcels/${posted[3]!.body.trackingNo}`);
    expect(one.body).toMatchObject({ status: 'BATCHED', area: 'north', batchId: all[2]!.id });
    const batch = await api().get(`/batches/${all[2]!.id}`);
    expect(batch.body).toMatchObject({ id: all[2]!.id, area: 'north', reason: 'FULL' });
    expect(
      await waitFor(
        async () => {
          const n = await api().get(`/notifications?batchId=${timeout.id}`);
          return n.body.notifications?.[0]?.status === 'SENT';
        },
        3_000,
        20,
      ),
    ).toBe(true);
    const note = (await api().get(`/notifications?batchId=${timeout.id}`)).body.notifications[0];
    expect(note).toMatchObject({ kind: 'BATCH_DISPATCHED', recipient: 'sort-north@example.com', payload: { reason: 'TIMEOUT', parcels: 5 } });
    expect((await api().get('/areas/north')).body).toMatchObject({ waiting: 0, firstArrivalAt: null });
  });

  it('takes the same tracking number again as the same parcel; another area is a conflict', async () => {
    await area('south');
    await area('east');
    const t = tn('south');
    const a = await api().post('/parcels').send({ trackingNo: t, area: 'south' });
    const b = await api().post('/parcels').send({ trackingNo: t, area: 'south' });
    expect(a.status).toBe(202);
    expect(b.status).toBe(200);
    expect(b.body).toEqual(a.body);
    const c = await api().post('/parcels').send({ trackingNo: t, area: 'east' });
    expect(c.status).toBe(409);
    expect(c.body.code).toBe('TRACKING_NO_CONFLICT');
    expect((await api().get('/areas/south')).body.waiting).toBe(1);
  });

  it('batches the parcels of a batch taken out of Redis but never committed, once', async () => {
    // An API-only instance on its own keys: no flusher of its own races the test.
    const apiOnly = await startTestService(tdb.url, { PARCEL_MAX_WAIT_SECONDS: '1', PARCEL_RECONCILE_GRACE_SECONDS: '0' }, 'api');
    try {
      const http = apiOnly.api();
      const m = apiOnly.module('parcels') as unknown as ParcelsModule;
      await http.put('/areas/crash').send({ vehiclePlate: 'CR-1', sorterContact: 'crash@example.com' });
      const ts = [tn('crash'), tn('crash'), tn('crash')];
      for (const t of ts) expect((await http.post('/parcels').send({ trackingNo: t, area: 'crash' })).status).toBe(202);
      await sleep(1_050);
      // A flusher takes the batch out of Redis and dies before committing it.
      const r = await m.batcher.takeDue(0);
      expect(r.batches.flatMap((x) => x.items.map((i) => i.item)).sort()).toEqual([...ts].sort());
      expect((await http.get('/areas/crash')).body.waiting).toBe(3); // PostgreSQL still has them waiting
      expect((await m.batcher.takeDue(0)).batches).toEqual([]); // and Redis no longer does
      expect(await m.reconcile.run()).toEqual({ batches: 1, parcels: 3, regrouped: 0, rules: 0 });
      expect(await m.reconcile.run()).toEqual({ batches: 0, parcels: 0, regrouped: 0, rules: 0 });
      const batches = (await http.get('/batches?area=crash')).body.batches;
      expect(batches).toHaveLength(1);
      expect(batches[0]).toMatchObject({ reason: 'TIMEOUT', vehiclePlate: 'CR-1' });
      expect(batches[0].parcels.sort()).toEqual([...ts].sort());
      expect((await http.get('/areas/crash')).body.waiting).toBe(0);
    } finally {
      await stopTestService(apiOnly);
    }
  });
});

describe("an area's sorter contact", () => {
  it('is one mailbox or one phone number, a number kept in E.164', async () => {
    const phone = await api().put('/areas/by-phone').send({ vehiclePlate: 'P1', sorterContact: '+44 7911 123456' });
    expect(phone.status).toBe(200);
    expect(phone.body.sorterContact).toBe('+447911123456');
    const mail = await api().put('/areas/by-mail').send({ vehiclePlate: 'P2', sorterContact: 'depot@example.com' });
    expect(mail.body.sorterContact).toBe('depot@example.com');
    const refused = await api().put('/areas/by-phone').send({ vehiclePlate: 'P1', sorterContact: 'call the depot' });
    expect(refused.status).toBe(422);
    expect(refused.body.errors).toEqual([expect.objectContaining({ path: 'sorterContact' })]);
    expect((await api().get('/areas/by-phone')).body.sorterContact).toBe('+447911123456');
  });
});

describe('bad input: 4xx problem+json, nothing written', () => {
  const cases: [string, () => Test, number, string][] = [
    ['area code with a colon', () => api().put('/areas/a:b').send({ vehiclePlate: 'X1', sorterContact: 'abc' }), 400, 'INVALID_AREA_CODE'],
    ['area code with braces', () => api().put('/areas/%7Bx%7D').send({ vehiclePlate: 'X1', sorterContact: 'abc' }), 400, 'INVALID_AREA_CODE'],
    [
      'area code too long',
      () =>
        api()
          .put(`/areas/${'a'.repeat(33)}`)
          .send({ vehiclePlate: 'X1', sorterContact: 'abc' }),
      400,
      'INVALID_AREA_CODE',
    ],
    ['area code with a space', () => api().put('/areas/a%20b').send({ vehiclePlate: 'X1', sorterContact: 'abc' }), 400, 'INVALID_AREA_CODE'],
    [
      'plate too long',
      () =>
        api()
          .put('/areas/ok')
          .send({ vehiclePlate: 'X'.repeat(17), sorterContact: 'abc' }),
      400,
      'VALIDATION_FAILED',
    ],
    ['no plate', () => api().put('/areas/ok').send({ sorterContact: 'abc' }), 400, 'VALIDATION_FAILED'],
    ['NUL in a contact', () => api().put('/areas/ok').send({ vehiclePlate: 'X1', sorterContact: 'a\u0000bc' }), 400, 'VALIDATION_FAILED'],
    ['a sorter contact that is no contact', () => api().put('/areas/ok').send({ vehiclePlate: 'X1', sorterContact: 'the sorters' }), 422, 'INVALID_CONTACT'],
    ['two sorter contacts', () => api().put('/areas/ok').send({ vehiclePlate: 'X1', sorterContact: 'a@example.com, b@example.com' }), 422, 'INVALID_CONTACT'],
    [
      'markup as a sorter contact',
      () => api().put('/areas/ok').send({ vehiclePlate: 'X1', sorterContact: '"><img src=x onerror=alert(1)>' }),
      422,
      'INVALID_CONTACT',
    ],
    ['unknown area', () => api().post('/parcels').send({ trackingNo: 'T-unknown', area: 'nowhere' }), 422, 'UNKNOWN_AREA'],
    ['bad area in a parcel', () => api().post('/parcels').send({ trackingNo: 'T-bad', area: 'a:b' }), 400, 'VALIDATION_FAILED'],
    [
      'tracking number too long',
      () =>
        api()
          .post('/parcels')
          .send({ trackingNo: 'T'.repeat(65), area: 'north' }),
      400,
      'VALIDATION_FAILED',
    ],
    ['empty tracking number', () => api().post('/parcels').send({ trackingNo: '', area: 'north' }), 400, 'VALIDATION_FAILED'],
    [
      'oversized body',
      () =>
        api()
          .post('/parcels')
          .send({ trackingNo: 'T-big', area: 'north', pad: 'x'.repeat(70_000) }),
      413,
      'PAYLOAD_TOO_LARGE',
    ],
    ['unknown field', () => api().post('/parcels').send({ trackingNo: 'T-f', area: 'north', weight: 3 }), 400, 'VALIDATION_FAILED'],
    ['unknown parcel', () => api().get('/parcels/NOPE-1'), 404, 'PARCEL_NOT_FOUND'],
    ['unknown area read', () => api().get('/areas/nowhere'), 404, 'AREA_NOT_FOUND'],
    ['batch id not a UUID', () => api().get('/batches/123'), 400, 'INVALID_BATCH_ID'],
    ['batches without an area', () => api().get('/batches'), 400, 'VALIDATION_FAILED'],
    ['batches with a bad area', () => api().get('/batches?area=a:b'), 400, 'VALIDATION_FAILED'],
  ];

  it.each(cases)('%s', async (_label, send, status, code) => {
    const before = [await tdb.db.parcel.count(), await tdb.db.area.count(), await tdb.db.batch.count()];
    const res = await send();
    expect(res.status).toBe(status);
    expect(res.headers['content-type']).toMatch(/application\/problem\+json/);
    expect(res.body).toMatchObject({ status, code });
    expect([await tdb.db.parcel.count(), await tdb.db.area.count(), await tdb.db.batch.count()]).toEqual(before);
  });
});
