// Two clients, one service: client B walks every route the OpenAPI document
// says needs an API key, aimed at client A's objects. Each answer must be the
// one an unknown object gets (404 with the same code and shape, or a list
// with nothing of A's), and nothing of A's may change. The table of probes
// must name exactly the document's key routes, so a new route cannot skip it.
import { randomBytes, randomUUID } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import request, { type Agent, type Response, type Test } from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SCOPES } from '../../../src/core/auth/scopes.js';
import { APPOINTMENTS_QUEUE } from '../../../src/modules/appointments/appointments.module.js';
import { remindJobId } from '../../../src/modules/appointments/appointments.service.js';
import { ORDERS_QUEUE } from '../../../src/modules/orders/orders.module.js';
import { expireJobId } from '../../../src/modules/orders/orders.service.js';
import { appointmentBody, areaBody, orderBody } from '../../helpers/bodies.js';
import { callsRoute, keyRoutes, masked, type OpenApiDoc } from '../../helpers/clients-walk.js';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { waitFor } from '../../helpers/redis.js';
import { bearer, makeApiKey, startTestService, stopTestService, type TestService } from '../../helpers/service.js';

const TOKEN = 'clients-walk-admin-token-0123456789';
const HOUR_MS = 3_600_000;
/** B's own area, made before the walk: A's tracking numbers go in there. */
const B_OWN = 'B-OWN';
const A_AREA = areaBody({ vehiclePlate: 'A-VAN-1', sorterContact: 'sorters-a@example.com' });
const B_AREA = areaBody({ vehiclePlate: 'B-VAN-1', sorterContact: 'sorters-b@example.com' });

/** What a probe names: A's objects, or (the control) values nobody has. */
type Target = {
  order: string;
  cancelledOrder: string;
  appointment: string;
  remindedAppointment: string;
  area: string;
  /** WAITING */
  parcel: string;
  /** BATCHED, the first and the second of the batch */
  firstParcel: string;
  batchedParcel: string;
  batch: string;
  orderKey: string;
  appointmentKey: string;
  /** A's pending timers: one for the single routes, one for the batch */
  timer: string;
  batchTimer: string;
};
type Probe = {
  what: string;
  call: (b: Agent, t: Target) => Test;
  /** Asserts (softly, under `name`) what B must get. */
  expect: (res: Response, t: Target, name: string) => void;
  /** Compare the whole answer with the control's (a problem answer always is). */
  sameBody?: boolean;
};
type Snapshot = Record<string, { status: number; body: unknown }>;

let tdb: TestDb;
let svc: TestService;
let doc: OpenApiDoc;
let keyA: string;
let keyB: string;
let a: Target;
let before: Snapshot;

const as = (key: string) => request.agent(svc.url).set(bearer(key));
const admin = () => request.agent(svc.url).set(bearer(TOKEN));

function unknownTarget(): Target {
  const hex = randomBytes(4).toString('hex');
  return {
    order: randomUUID(),
    cancelledOrder: randomUUID(),
    appointment: randomUUID(),
    remindedAppointment: randomUUID(),
    area: `U${hex}`,
    parcel: `U-${hex}-3`,
    firstParcel: `U-${hex}-1`,
    batchedParcel: `U-${hex}-2`,
    batch: randomUUID(),
    orderKey: `k-${hex}-o`,
    appointmentKey: `k-${hex}-a`,
    timer: `u-${hex}-t`,
    batchTimer: `u-${hex}-b`,
  };
}

/** A timer far ahead (it never fires in this file), to a receiver nobody runs. */
const timerBody = (payload: string) => ({ delayMs: 3_600_000, target: { type: 'webhook', url: 'http://127.0.0.1:9/timers' }, payload, mode: 'keep' });

const problem = (res: Response) => ({ status: res.status, code: (res.body as { code?: string }).code });
const notFound =
  (code: string) =>
  (res: Response, _t: Target, name: string): void => {
    expect.soft(problem(res), name).toEqual({ status: 404, code });
  };
const refused =
  (status: number, code: string) =>
  (res: Response, _t: Target, name: string): void => {
    expect.soft(problem(res), name).toEqual({ status, code });
  };
const emptyList =
  (field: string) =>
  (res: Response, _t: Target, name: string): void => {
    expect.soft({ status: res.status, [field]: res.body[field] }, name).toEqual({ status: 200, [field]: [] });
  };
/** A new object of B's: not one of A's, not a replay of A's request. */
const createdAnew =
  (field: keyof Target) =>
  (res: Response, t: Target, name: string): void => {
    expect.soft({ status: res.status, replayed: res.headers['idempotent-replayed'] }, name).toEqual({ status: 201, replayed: undefined });
    expect.soft(res.body.id, `${name}: a new id`).not.toBe(t[field]);
  };
/** B's own new parcel under A's tracking number (not 409 TRACKING_NO_CONFLICT: no existence oracle). */
const ownParcel = (res: Response, t: Target, name: string): void => {
  expect.soft({ status: res.status, body: res.body }, name).toMatchObject({ status: 202, body: { trackingNo: t.parcel, area: B_OWN } });
};
const enc = encodeURIComponent;

// In the order walked: reads first, then B's writes. B's own objects made on
// the way (parcels under A's tracking numbers in B's own area, its own area
// B7) come after every probe they would rightly answer otherwise (a tracking
// number B holds in one area is 409 in another; B's B7 is found).
const WALK: Record<string, Probe[]> = {
  'GET /orders/{id}': [
    { what: "A's unpaid order", call: (b, t) => b.get(`/orders/${t.order}`), expect: notFound('ORDER_NOT_FOUND') },
    { what: "A's cancelled order", call: (b, t) => b.get(`/orders/${t.cancelledOrder}`), expect: notFound('ORDER_NOT_FOUND') },
  ],
  'GET /appointments/{id}': [
    { what: "A's booked appointment", call: (b, t) => b.get(`/appointments/${t.appointment}`), expect: notFound('APPOINTMENT_NOT_FOUND') },
    { what: "A's reminded appointment", call: (b, t) => b.get(`/appointments/${t.remindedAppointment}`), expect: notFound('APPOINTMENT_NOT_FOUND') },
  ],
  'GET /areas/{code}': [{ what: "A's area", call: (b, t) => b.get(`/areas/${t.area}`), expect: notFound('AREA_NOT_FOUND') }],
  'GET /parcels/{trackingNo}': [
    { what: "A's waiting parcel", call: (b, t) => b.get(`/parcels/${enc(t.parcel)}`), expect: notFound('PARCEL_NOT_FOUND') },
    { what: "A's batched parcel", call: (b, t) => b.get(`/parcels/${enc(t.batchedParcel)}`), expect: notFound('PARCEL_NOT_FOUND') },
  ],
  'GET /batches/{id}': [{ what: "A's batch", call: (b, t) => b.get(`/batches/${t.batch}`), expect: notFound('BATCH_NOT_FOUND') }],
  'GET /batches': [{ what: "A's area", call: (b, t) => b.get('/batches').query({ area: t.area }), expect: emptyList('batches'), sameBody: true }],
  'GET /notifications': [
    ...(['cancelledOrder', 'order'] as const).map((o) => ({
      what: `orderId of A's ${o}`,
      call: (b: Agent, t: Target) => b.get('/notifications').query({ orderId: t[o] }),
      expect: emptyList('notifications'),
      sameBody: true,
    })),
    ...(['remindedAppointment', 'appointment'] as const).map((o) => ({
      what: `appointmentId of A's ${o}`,
      call: (b: Agent, t: Target) => b.get('/notifications').query({ appointmentId: t[o] }),
      expect: emptyList('notifications'),
      sameBody: true,
    })),
    {
      what: "batchId of A's batch",
      call: (b, t) => b.get('/notifications').query({ batchId: t.batch }),
      expect: emptyList('notifications'),
      sameBody: true,
    },
  ],
  'GET /timers/{key}': [{ what: "A's pending timer", call: (b, t) => b.get(`/timers/${t.timer}`), expect: notFound('TIMER_NOT_FOUND') }],
  'GET /timers': [
    {
      what: "A's keys as a prefix",
      call: (b, t) => b.get('/timers').query({ prefix: t.timer }),
      expect: emptyList('timers'),
      sameBody: true,
    },
  ],
  'DELETE /timers/{key}': [{ what: "A's pending timer", call: (b, t) => b.delete(`/timers/${t.timer}`), expect: notFound('TIMER_NOT_FOUND') }],
  'PUT /timers/{key}': [
    {
      what: "A's timer key, keep: B's own timer",
      call: (b, t) => b.put(`/timers/${t.timer}`).send(timerBody('b')),
      expect: (res, t, name) => {
        expect.soft({ status: res.status, key: res.body.key, payload: res.body.payload }, name).toEqual({ status: 201, key: t.timer, payload: 'b' });
      },
    },
  ],
  'POST /timers/batch': [
    {
      what: "A's other timer key, keep: B's own timer",
      call: (b, t) => b.post('/timers/batch').send({ timers: [{ key: t.batchTimer, ...timerBody('b') }] }),
      expect: (res, _t, name) => {
        expect.soft({ status: res.status, result: res.body.results?.[0]?.status }, name).toEqual({ status: 200, result: 201 });
      },
    },
  ],
  'POST /orders/{id}/pay': [
    { what: "A's unpaid order", call: (b, t) => b.post(`/orders/${t.order}/pay`).send({ paymentRef: 'b-pays' }), expect: notFound('ORDER_NOT_FOUND') },
    { what: "A's cancelled order", call: (b, t) => b.post(`/orders/${t.cancelledOrder}/pay`).send({}), expect: notFound('ORDER_NOT_FOUND') },
  ],
  'POST /orders/{id}/cancel': [
    { what: "A's unpaid order", call: (b, t) => b.post(`/orders/${t.order}/cancel`), expect: notFound('ORDER_NOT_FOUND') },
    { what: "A's cancelled order", call: (b, t) => b.post(`/orders/${t.cancelledOrder}/cancel`), expect: notFound('ORDER_NOT_FOUND') },
  ],
  'PATCH /orders/{id}': [
    {
      what: "A's unpaid order, a later deadline",
      call: (b, t) => b.patch(`/orders/${t.order}`).send({ extendBySeconds: 60 }),
      expect: notFound('ORDER_NOT_FOUND'),
    },
    {
      what: "A's cancelled order, a deadline",
      call: (b, t) => b.patch(`/orders/${t.cancelledOrder}`).send({ expiresAt: new Date(Date.now() + HOUR_MS).toISOString() }),
      expect: notFound('ORDER_NOT_FOUND'),
    },
  ],
  'PATCH /appointments/{id}': [
    {
      what: "A's booked appointment, a new slot",
      call: (b, t) => b.patch(`/appointments/${t.appointment}`).send({ startsAt: new Date(Date.now() + 3 * HOUR_MS).toISOString() }),
      expect: notFound('APPOINTMENT_NOT_FOUND'),
    },
    {
      what: "A's reminded appointment, a new lead",
      call: (b, t) => b.patch(`/appointments/${t.remindedAppointment}`).send({ remindBeforeSeconds: 60 }),
      expect: notFound('APPOINTMENT_NOT_FOUND'),
    },
  ],
  'POST /appointments/{id}/cancel': [
    { what: "A's booked appointment", call: (b, t) => b.post(`/appointments/${t.appointment}/cancel`), expect: notFound('APPOINTMENT_NOT_FOUND') },
    {
      what: "A's reminded appointment",
      call: (b, t) => b.post(`/appointments/${t.remindedAppointment}/cancel`),
      expect: notFound('APPOINTMENT_NOT_FOUND'),
    },
  ],
  'POST /orders': [
    {
      what: "A's Idempotency-Key and body",
      call: (b, t) =>
        b
          .post('/orders')
          .set('Idempotency-Key', t.orderKey)
          .send(orderBody({ paymentTimeoutSeconds: 3_600 })),
      expect: createdAnew('order'),
    },
  ],
  'POST /appointments': [
    {
      what: "A's Idempotency-Key and body",
      call: (b, t) => b.post('/appointments').set('Idempotency-Key', t.appointmentKey).send(bookedBody()),
      expect: createdAnew('appointment'),
    },
  ],
  'POST /parcels/batch': [
    {
      what: "A's tracking numbers and a new one, into A's area",
      call: (b, t) =>
        b.post('/parcels/batch').send({
          parcels: [t.parcel, t.batchedParcel, 'WALK-NEW'].map((trackingNo) => ({ trackingNo, area: t.area })),
        }),
      expect: (res, _t, name) => {
        const codes = res.body.results?.map((r: { error?: { code: string } }) => r.error?.code);
        expect.soft({ status: res.status, codes }, name).toEqual({ status: 200, codes: ['UNKNOWN_AREA', 'UNKNOWN_AREA', 'UNKNOWN_AREA'] });
      },
      sameBody: true,
    },
    {
      what: "A's first tracking number into B's own area",
      call: (b, t) => b.post('/parcels/batch').send({ parcels: [{ trackingNo: t.firstParcel, area: B_OWN }] }),
      expect: (res, t, name) => {
        expect.soft({ status: res.status, result: res.body.results?.[0] }, name).toMatchObject({
          status: 200,
          result: { trackingNo: t.firstParcel, area: B_OWN, created: true },
        });
      },
    },
  ],
  'POST /parcels': [
    {
      what: "a new parcel into A's area",
      call: (b, t) => b.post('/parcels').send({ trackingNo: 'WALK-NEW', area: t.area }),
      expect: refused(422, 'UNKNOWN_AREA'),
    },
    {
      what: "A's waiting parcel again, into A's area",
      call: (b, t) => b.post('/parcels').send({ trackingNo: t.parcel, area: t.area }),
      expect: refused(422, 'UNKNOWN_AREA'),
    },
    {
      what: "A's batched parcel again, into A's area",
      call: (b, t) => b.post('/parcels').send({ trackingNo: t.batchedParcel, area: t.area }),
      expect: refused(422, 'UNKNOWN_AREA'),
    },
    { what: "A's tracking number into B's own area", call: (b, t) => b.post('/parcels').send({ trackingNo: t.parcel, area: B_OWN }), expect: ownParcel },
  ],
  // Before B puts an area of A's code of its own (the next probe), which it may then flush.
  'POST /areas/{code}/flush': [{ what: "A's area", call: (b, t) => b.post(`/areas/${t.area}/flush`), expect: notFound('AREA_NOT_FOUND') }],
  'PUT /areas/{code}': [
    {
      what: "A's area code, for B's own area",
      call: (b, t) => b.put(`/areas/${t.area}`).send(B_AREA),
      expect: (res, t, name) => {
        expect
          .soft({ status: res.status, body: res.body }, name)
          .toEqual({ status: 200, body: { code: t.area, ...B_AREA, batchSize: null, maxWaitSeconds: null } });
      },
    },
  ],
  'POST /parcels/{trackingNo}/withdraw': [
    // A's batched one: B has a parcel of A's waiting one's number of its own (a probe above made it).
    { what: "A's batched parcel", call: (b, t) => b.post(`/parcels/${enc(t.batchedParcel)}/withdraw`), expect: notFound('PARCEL_NOT_FOUND') },
  ],
  'POST /parcels/{trackingNo}/move': [
    {
      what: "A's batched parcel, into B's own area",
      call: (b, t) => b.post(`/parcels/${enc(t.batchedParcel)}/move`).send({ area: B_OWN }),
      expect: notFound('PARCEL_NOT_FOUND'),
    },
  ],
};

/** A booking whose reminder is an hour ahead: its job waits in the queue. */
function bookedBody(): Record<string, unknown> {
  return appointmentBody({ startsAt: new Date(Date.now() + 2 * HOUR_MS).toISOString(), remindBeforeSeconds: 3_600 });
}

/** Everything A can read of its objects, the queue jobs behind them through the admin API. */
async function snapshot(): Promise<Snapshot> {
  const A = as(keyA);
  const job = (queue: string, id: string) => admin().get(`/admin/queues/${queue}/jobs/${enc(id)}`);
  const reads: Record<string, () => Test> = {
    order: () => A.get(`/orders/${a.order}`),
    cancelledOrder: () => A.get(`/orders/${a.cancelledOrder}`),
    appointment: () => A.get(`/appointments/${a.appointment}`),
    remindedAppointment: () => A.get(`/appointments/${a.remindedAppointment}`),
    area: () => A.get(`/areas/${a.area}`),
    parcel: () => A.get(`/parcels/${enc(a.parcel)}`),
    batchedParcel: () => A.get(`/parcels/${enc(a.batchedParcel)}`),
    firstParcel: () => A.get(`/parcels/${enc(a.firstParcel)}`),
    batch: () => A.get(`/batches/${a.batch}`),
    batches: () => A.get('/batches').query({ area: a.area }),
    orderNotices: () => A.get('/notifications').query({ orderId: a.order }),
    cancelNotices: () => A.get('/notifications').query({ orderId: a.cancelledOrder }),
    appointmentNotices: () => A.get('/notifications').query({ appointmentId: a.appointment }),
    reminderNotices: () => A.get('/notifications').query({ appointmentId: a.remindedAppointment }),
    batchNotices: () => A.get('/notifications').query({ batchId: a.batch }),
    expiryJob: () => job(ORDERS_QUEUE, expireJobId(a.order)),
    reminderJob: () => job(APPOINTMENTS_QUEUE, remindJobId(a.appointment)),
    timer: () => A.get(`/timers/${a.timer}`),
    batchTimer: () => A.get(`/timers/${a.batchTimer}`),
    timers: () => A.get('/timers'),
  };
  const read = async ([name, r]: [string, () => Test]) => {
    const res = await r();
    return [name, { status: res.status, body: res.body as unknown }] as const;
  };
  return Object.fromEntries(await Promise.all(Object.entries(reads).map(read)));
}

const pick = (s: Snapshot, keys: string[]) => Object.fromEntries(keys.map((k) => [k, s[k]]));

/** Status and, for a problem, its code. */
const outcome = (res: Response) => ({ status: res.status, code: res.status >= 400 ? (res.body as { code?: string }).code : undefined });

/** Delivered or given up: a notice still on its way would change between two reads. */
const settled = (s: Snapshot, name: string) =>
  ((s[name]?.body as { notifications?: { status: string }[] }).notifications ?? []).every((n) => n.status === 'SENT' || n.status === 'FAILED');

beforeAll(async () => {
  tdb = await createTestDb('clients_walk');
  // Two parcels make a batch; a waiting one stays waiting for the whole file.
  svc = await startTestService(tdb.url, {
    ADMIN_TOKEN: TOKEN,
    PARCEL_BATCH_SIZE: '2',
    PARCEL_MAX_WAIT_SECONDS: '3600',
    TIMER_WEBHOOK_HOSTS: '127.0.0.1:9',
  });
  keyA = (await makeApiKey(tdb.url, SCOPES, 'shop-a', 'shop-a')).key;
  keyB = (await makeApiKey(tdb.url, SCOPES, 'shop-b', 'shop-b')).key;
  doc = (await request(svc.url).get('/openapi.json')).body as OpenApiDoc;

  const A = as(keyA);
  const ok = (res: Response, status: number) => {
    expect(res.status, JSON.stringify(res.body)).toBe(status);
    return res.body as { id: string; batchId: string | null; status: string };
  };
  const orderKey = 'walk-order-1';
  const appointmentKey = 'walk-appointment-1';
  const order = ok(
    await A.post('/orders')
      .set('Idempotency-Key', orderKey)
      .send(orderBody({ paymentTimeoutSeconds: 3_600 })),
    201,
  );
  const cancelled = ok(await A.post('/orders').send(orderBody()), 201);
  ok(await A.post(`/orders/${cancelled.id}/cancel`), 200);
  const appointment = ok(await A.post('/appointments').set('Idempotency-Key', appointmentKey).send(bookedBody()), 201);
  const reminded = ok(await A.post('/appointments').send(appointmentBody()), 201); // reminded at once
  ok(await A.put('/areas/B7').send(A_AREA), 200);
  ok(await A.post('/parcels').send({ trackingNo: 'WALK-1', area: 'B7' }), 202);
  const full = ok(await A.post('/parcels').send({ trackingNo: 'WALK-2', area: 'B7' }), 202);
  expect(full.status).toBe('BATCHED');
  ok(await A.post('/parcels').send({ trackingNo: 'WALK-3', area: 'B7' }), 202);
  ok(await A.put('/timers/walk-timer').send(timerBody('a')), 201);
  ok(await A.put('/timers/walk-batch-timer').send(timerBody('a')), 201);
  a = {
    order: order.id,
    cancelledOrder: cancelled.id,
    appointment: appointment.id,
    remindedAppointment: reminded.id,
    area: 'B7',
    parcel: 'WALK-3',
    firstParcel: 'WALK-1',
    batchedParcel: 'WALK-2',
    batch: full.batchId as string,
    orderKey,
    appointmentKey,
    timer: 'walk-timer',
    batchTimer: 'walk-batch-timer',
  };
  ok(await as(keyB).put(`/areas/${B_OWN}`).send(B_AREA), 200);

  // A's notices written and delivered: a cancel, a reminder and a batch notice.
  const notices = ['cancelNotices', 'reminderNotices', 'batchNotices'];
  expect(
    await waitFor(async () => {
      before = await snapshot();
      return notices.every((n) => ((before[n]?.body as { notifications?: unknown[] }).notifications ?? []).length === 1 && settled(before, n));
    }, 20_000),
    JSON.stringify(notices.map((n) => before[n])),
  ).toBe(true);
  for (const [name, r] of Object.entries(before)) expect(r.status, `A reads its ${name}`).toBe(200);
});
afterAll(async () => {
  await stopTestService(svc, tdb);
});

describe('two clients, every key route', () => {
  it('the walk has probes for exactly the routes the document says need an API key', () => {
    const documented = keyRoutes(doc).sort();
    expect(documented.length).toBeGreaterThan(10);
    expect(Object.keys(WALK).sort()).toEqual(documented);
    for (const [route, probes] of Object.entries(WALK)) expect(probes.length, route).toBeGreaterThan(0);
  });

  it("B gets what an unknown object gets for each of A's objects, and nothing of A's changes", async () => {
    const documented = new Set(keyRoutes(doc));
    const B = as(keyB);
    let last = before;
    for (const [route, probes] of Object.entries(WALK)) {
      if (!documented.has(route)) continue; // the test above names it
      for (const probe of probes) {
        const name = `${route}: ${probe.what}`;
        const req = probe.call(B, a);
        expect(callsRoute(req, route), `${name} calls ${req.method} ${req.url}`).toBe(true);
        const res = await req;
        const control = unknownTarget();
        const other = await probe.call(B, control);
        probe.expect(res, a, name);
        expect.soft(outcome(res), `${name}: as for an unknown object`).toEqual(outcome(other));
        if (probe.sameBody || res.status >= 400)
          expect.soft(masked(res.body, a), `${name}: the same answer as for an unknown object`).toEqual(masked(other.body, control));
        const now = await snapshot();
        const changed = Object.keys(now).filter((k) => !isDeepStrictEqual(now[k], last[k]));
        expect.soft(pick(now, changed), `${name}: changed nothing of A's`).toEqual(pick(last, changed));
        last = now;
      }
    }
  });

  it('A reads every object of its own as before the walk', async () => {
    const now = await snapshot();
    const changed = Object.keys(now).filter((k) => !isDeepStrictEqual(now[k], before[k]));
    expect(pick(now, changed)).toEqual(pick(before, changed));
  });

  it("B's own area B7 and A's tracking numbers batch apart from A's", async () => {
    const A = as(keyA);
    const B = as(keyB);
    expect((await B.put('/areas/B7').send(B_AREA)).body).toEqual({ code: 'B7', ...B_AREA, batchSize: null, maxWaitSeconds: null });
    expect((await B.get('/areas/B7')).body).toMatchObject({ ...B_AREA, waiting: 0 });
    expect((await A.get('/areas/B7')).body).toMatchObject({ ...A_AREA, waiting: 1 });

    // A's WALK-3 waits in A's B7: B's first parcel there must not complete a batch with it.
    const first = await B.post('/parcels').send({ trackingNo: 'WALK-2', area: 'B7' });
    expect(first.status).toBe(202);
    expect(first.body).toMatchObject({ trackingNo: 'WALK-2', area: 'B7', status: 'WAITING' });
    const second = await B.post('/parcels').send({ trackingNo: 'WALK-B', area: 'B7' });
    expect(second.body).toMatchObject({ status: 'BATCHED' });
    const bBatch = second.body.batchId as string;
    expect(bBatch).not.toBe(a.batch);
    expect((await B.get(`/batches/${bBatch}`)).body).toMatchObject({ area: 'B7', vehiclePlate: B_AREA.vehiclePlate, parcels: ['WALK-2', 'WALK-B'] });
    expect((await B.get('/batches').query({ area: 'B7' })).body.batches.map((b: { id: string }) => b.id)).toEqual([bBatch]);

    expect((await A.get('/parcels/WALK-2')).body).toMatchObject({ status: 'BATCHED', batchId: a.batch });
    expect((await A.get('/parcels/WALK-3')).body).toMatchObject({ status: 'WAITING', batchId: null });
    const aNext = await A.post('/parcels').send({ trackingNo: 'WALK-4', area: 'B7' });
    expect(aNext.body).toMatchObject({ status: 'BATCHED' });
    const aBatch = await A.get(`/batches/${aNext.body.batchId}`);
    expect(aBatch.body).toMatchObject({ area: 'B7', vehiclePlate: A_AREA.vehiclePlate, parcels: ['WALK-3', 'WALK-4'] });
    expect((await A.get('/batches').query({ area: 'B7' })).body.batches.map((b: { id: string }) => b.id)).toEqual([aNext.body.batchId, a.batch]);

    // Each batch notice goes to its own client's sorters.
    const recipients = async (agent: Agent, batchId: string) =>
      (await agent.get('/notifications').query({ batchId })).body.notifications.map((n: { recipient: string }) => n.recipient);
    expect(await recipients(B, bBatch)).toEqual([B_AREA.sorterContact]);
    expect(await recipients(A, aNext.body.batchId)).toEqual([A_AREA.sorterContact]);
  });
});
