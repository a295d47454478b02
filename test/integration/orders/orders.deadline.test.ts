// Moving an order's payment deadline (PATCH /orders/:id) and an operator's
// extension of an incident's orders (POST /admin/orders/extend) through HTTP:
// both forms, every bad input refused with nothing written (the row and the
// Redis job as they were), the orders that may not move, the longest window,
// the expiry at the new time and never at the old, a lost reschedule
// repaired, and moves racing the expiry and pays.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { sleep, waitFor } from '../../helpers/redis.js';
import { orderBody } from '../../helpers/bodies.js';
import { expireJobId } from '../../../src/modules/orders/orders.service.js';
import type { createOrdersModule } from '../../../src/modules/orders/orders.module.js';
import { bearer, makeApiKey, startTestService, stopTestService, type TestService } from '../../helpers/service.js';
import request from 'supertest';

const ADMIN = 'orders-deadline-admin-token-0123456789';
const MAX_WINDOW_S = 120;
let tdb: TestDb;
let svc: TestService;
let otherKey: string;
let incidentKey: string;

beforeAll(async () => {
  tdb = await createTestDb('orders_deadline');
  svc = await startTestService(tdb.url, {
    ORDER_RECONCILE_INTERVAL_SECONDS: '3600',
    ORDER_RECONCILE_GRACE_SECONDS: '0',
    ADMIN_TOKEN: ADMIN,
    ORDER_MAX_WINDOW_SECONDS: String(MAX_WINDOW_S),
  });
  otherKey = (await makeApiKey(tdb.url, undefined, 'other', 'shop-b')).key;
  // The extension's own client: the other tests' orders of 'default' expire in its ranges too.
  incidentKey = (await makeApiKey(tdb.url, undefined, 'incident', 'shop-c')).key;
});
afterAll(async () => {
  await stopTestService(svc, tdb);
});

const api = () => svc.api();
const orders = () => svc.module('orders') as ReturnType<typeof createOrdersModule>;
const jobDue = async (id: string) => (await orders().queue.get(expireJobId(id)))?.dueAt ?? null;
const row = (id: string) => tdb.db.order.findUniqueOrThrow({ where: { id } });

async function create(timeoutSeconds: number, as = api()): Promise<{ id: string; expiresAt: number; createdAt: number }> {
  const res = await as.post('/orders').send(orderBody({ paymentTimeoutSeconds: timeoutSeconds }));
  expect(res.status).toBe(201);
  return { id: res.body.id, expiresAt: Date.parse(res.body.expiresAt), createdAt: Date.parse(res.body.createdAt) };
}
const patch = (id: string, body: unknown, key?: string) => {
  const r = api().patch(`/orders/${id}`);
  return (key ? r.set('Idempotency-Key', key) : r).send(body as object);
};
const extend = (body: unknown, token = ADMIN) =>
  request(svc.url)
    .post('/admin/orders/extend')
    .set(bearer(token))
    .send(body as object);

describe('PATCH /orders/:id', () => {
  it('moves the deadline by extendBySeconds or to expiresAt, the expiry job with it', async () => {
    const o = await create(60);
    const a = await patch(o.id, { extendBySeconds: 30 });
    expect(a.status).toBe(200);
    expect(Date.parse(a.body.expiresAt)).toBe(o.expiresAt + 30_000);
    expect(a.body).toMatchObject({ id: o.id, status: 'UNPAID' });
    expect(await jobDue(o.id)).toBe(o.expiresAt + 30_000);
    const to = new Date(o.createdAt + 100_000).toISOString();
    const b = await patch(o.id, { expiresAt: to });
    expect(b.status).toBe(200);
    expect(b.body.expiresAt).toBe(to);
    expect((await row(o.id)).expiresAt.toISOString()).toBe(to);
    expect(await jobDue(o.id)).toBe(Date.parse(to));
    // The same PATCH again answers the same.
    const again = await patch(o.id, { expiresAt: to });
    expect(again.status).toBe(200);
    expect(again.body).toEqual(b.body);
  });

  it('answers a repeat under its Idempotency-Key as the first, without moving again', async () => {
    const o = await create(60);
    const first = await patch(o.id, { extendBySeconds: 10 }, 'move-1');
    const second = await patch(o.id, { extendBySeconds: 10 }, 'move-1');
    expect(first.status).toBe(200);
    expect(second.status).toBe(200);
    expect(second.body.expiresAt).toBe(first.body.expiresAt);
    expect(Date.parse(second.body.expiresAt)).toBe(o.expiresAt + 10_000);
    const reused = await patch(o.id, { extendBySeconds: 20 }, 'move-1');
    expect(reused.status).toBe(422);
    expect(reused.body.code).toBe('IDEMPOTENCY_KEY_REUSED');
    const next = await patch(o.id, { extendBySeconds: 10 }, 'move-2');
    expect(Date.parse(next.body.expiresAt)).toBe(o.expiresAt + 20_000);
  });

  it("keeps the latest keyed move's key through a move without one: that move's retry still moves nothing", async () => {
    const o = await create(60);
    expect((await patch(o.id, { extendBySeconds: 10 }, 'kept-1')).status).toBe(200);
    const keyless = await patch(o.id, { extendBySeconds: 5 });
    expect(Date.parse(keyless.body.expiresAt)).toBe(o.expiresAt + 15_000);
    const retry = await patch(o.id, { extendBySeconds: 10 }, 'kept-1');
    expect(retry.status).toBe(200);
    expect(Date.parse(retry.body.expiresAt)).toBe(o.expiresAt + 15_000);
    expect((await row(o.id)).expiresAt.getTime()).toBe(o.expiresAt + 15_000);
    expect((await patch(o.id, { extendBySeconds: 20 }, 'kept-1')).body.code).toBe('IDEMPOTENCY_KEY_REUSED');
  });

  it('refuses every bad input with a problem and changes neither the row nor its job', async () => {
    const o = await create(60);
    const before = await row(o.id);
    const due = await jobDue(o.id);
    const cases: [unknown, number, string][] = [
      [{}, 400, 'VALIDATION_FAILED'],
      [{ extendBySeconds: 10, expiresAt: new Date(o.expiresAt + 1_000).toISOString() }, 400, 'VALIDATION_FAILED'],
      [{ extendBySeconds: 0 }, 400, 'VALIDATION_FAILED'],
      [{ extendBySeconds: -5 }, 400, 'VALIDATION_FAILED'],
      [{ extendBySeconds: 1.5 }, 400, 'VALIDATION_FAILED'],
      [{ extendBySeconds: '10' }, 400, 'VALIDATION_FAILED'],
      [{ extendBySeconds: null }, 400, 'VALIDATION_FAILED'],
      [{ extendBySeconds: 10, other: 1 }, 400, 'VALIDATION_FAILED'],
      [{ expiresAt: 'tomorrow' }, 400, 'VALIDATION_FAILED'],
      [{ expiresAt: '2030-01-01T00:00:00' }, 400, 'VALIDATION_FAILED'],
      [{ expiresAt: 1_900_000_000_000 }, 400, 'VALIDATION_FAILED'],
      [{ expiresAt: '0000-01-01T00:00:00Z' }, 400, 'VALIDATION_FAILED'],
      [[], 400, 'VALIDATION_FAILED'],
      [{ expiresAt: new Date(Date.now() - 1_000).toISOString() }, 422, 'EXPIRES_AT_IN_PAST'],
      [{ expiresAt: new Date(o.createdAt + (MAX_WINDOW_S + 1) * 1_000).toISOString() }, 422, 'PAYMENT_WINDOW_TOO_LONG'],
      [{ expiresAt: '9999-12-31T23:59:59Z' }, 422, 'PAYMENT_WINDOW_TOO_LONG'],
      [{ extendBySeconds: MAX_WINDOW_S }, 422, 'PAYMENT_WINDOW_TOO_LONG'],
      [{ extendBySeconds: 31_536_001 }, 400, 'VALIDATION_FAILED'],
    ];
    for (const [body, status, code] of cases) {
      const res = await patch(o.id, body);
      expect({ body, status: res.status, code: res.body.code }).toEqual({ body, status, code });
      expect(res.headers['content-type']).toMatch(/application\/problem\+json/);
    }
    const bad = await api().patch('/orders/not-a-uuid').send({ extendBySeconds: 10 });
    expect([bad.status, bad.body.code]).toEqual([400, 'INVALID_ORDER_ID']);
    const text = await api().patch(`/orders/${o.id}`).set('content-type', 'text/plain').send('extendBySeconds=10');
    expect(text.status).toBe(415);
    const foreign = await request(svc.url).patch(`/orders/${o.id}`).set(bearer(otherKey)).send({ extendBySeconds: 10 });
    expect([foreign.status, foreign.body.code]).toEqual([404, 'ORDER_NOT_FOUND']);
    expect(await row(o.id)).toEqual(before);
    expect(await jobDue(o.id)).toBe(due);
  });

  it('refuses to move a paid, a cancelled or an expired order (409)', async () => {
    const paid = await create(60);
    expect((await api().post(`/orders/${paid.id}/pay`).send({})).status).toBe(200);
    const cancelled = await create(60);
    expect((await api().post(`/orders/${cancelled.id}/cancel`)).status).toBe(200);
    // Expired, its job gone (Redis lost it): still UNPAID, past its deadline.
    const expired = await create(1);
    await orders().queue.cancel(expireJobId(expired.id));
    await sleep(Math.max(0, expired.expiresAt - Date.now()) + 100);
    for (const [o, code] of [
      [paid, 'ORDER_NOT_MOVABLE'],
      [cancelled, 'ORDER_NOT_MOVABLE'],
      [expired, 'ORDER_EXPIRED'],
    ] as const) {
      const res = await patch(o.id, { extendBySeconds: 30 });
      expect([res.status, res.body.code]).toEqual([409, code]);
      expect((await row(o.id)).expiresAt.getTime()).toBe(o.expiresAt);
    }
    expect((await row(expired.id)).status).toBe('UNPAID');
  });

  it('cancels a moved order at its new deadline, not its old, even with its old job left in Redis', async () => {
    const moved = await create(1);
    const stale = await create(1);
    for (const o of [moved, stale]) expect((await patch(o.id, { extendBySeconds: 2 })).status).toBe(200);
    // The reschedule Redis lost: the old job back at the old deadline.
    await orders().queue.schedule({ id: expireJobId(stale.id), type: 'order.expire', at: new Date(stale.expiresAt), payload: {} });
    await sleep(Math.max(0, stale.expiresAt - Date.now()) + 600);
    for (const o of [moved, stale]) expect((await row(o.id)).status).toBe('UNPAID');
    expect(await waitFor(async () => (await row(stale.id)).status === 'CANCELLED' && (await row(moved.id)).status === 'CANCELLED', 8_000, 50)).toBe(true);
    for (const o of [moved, stale]) expect((await row(o.id)).cancelledAt!.getTime()).toBeGreaterThanOrEqual(o.expiresAt + 2_000);
  });

  it('leaves an order moved earlier whose reschedule Redis lost to the reconciliation pass', async () => {
    const o = await create(60);
    const to = new Date(Date.now() + 1_000);
    expect((await patch(o.id, { expiresAt: to.toISOString() })).status).toBe(200);
    await orders().queue.schedule({ id: expireJobId(o.id), type: 'order.expire', at: new Date(o.expiresAt), payload: {} });
    await sleep(to.getTime() - Date.now() + 1_200);
    expect((await row(o.id)).status).toBe('UNPAID');
    expect((await orders().reconcile.run(60_000)).cancelled).toBeGreaterThanOrEqual(1);
    expect((await row(o.id)).status).toBe('CANCELLED');
  });

  it('re-creates the expiry job of a moved order that Redis lost, at the new deadline', async () => {
    const o = await create(60);
    const moved = await patch(o.id, { extendBySeconds: 5 });
    expect(moved.status).toBe(200);
    // An expiry that lost to the move and acked, the move's reschedule lost too: no job at all.
    await orders().queue.cancel(expireJobId(o.id));
    expect(await jobDue(o.id)).toBeNull();
    expect((await orders().reconcile.run(120_000)).jobsCreated).toBeGreaterThanOrEqual(1);
    expect(await jobDue(o.id)).toBe(o.expiresAt + 5_000);
  });

  it('ends moves racing the expiry and pays consistently: cancelled only at its last deadline, paid only before it', async () => {
    const list = await Promise.all(Array.from({ length: 30 }, () => create(2)));
    const outcome = new Map<string, { move: number; movedTo?: number; pay: number; paySent: number }>();
    await Promise.all(
      list.map(async (o, i) => {
        const moveAt = o.expiresAt - 250 + (i % 5) * 100; // some after the deadline: refused
        const payAt = o.expiresAt - 200 + (i % 7) * 150;
        const [m, p] = await Promise.all([
          sleep(Math.max(0, moveAt - Date.now())).then(() => patch(o.id, { extendBySeconds: 1 })),
          sleep(Math.max(0, payAt - Date.now())).then(async () => ({ sent: Date.now(), res: await api().post(`/orders/${o.id}/pay`).send({}) })),
        ]);
        expect([200, 409]).toContain(m.status);
        expect([200, 409]).toContain(p.res.status);
        outcome.set(o.id, { move: m.status, movedTo: m.status === 200 ? Date.parse(m.body.expiresAt) : undefined, pay: p.res.status, paySent: p.sent });
      }),
    );
    const ids = list.map((o) => o.id);
    expect(await waitFor(async () => (await tdb.db.order.count({ where: { id: { in: ids }, status: 'UNPAID' } })) === 0, 15_000, 100)).toBe(true);
    for (const o of list) {
      const r = await row(o.id);
      const x = outcome.get(o.id)!;
      if (x.movedTo !== undefined) expect(r.expiresAt.getTime()).toBe(x.movedTo);
      if (x.pay === 200) {
        expect(r.status).toBe('PAID');
        expect(r.paidAt!.getTime()).toBeLessThan(r.expiresAt.getTime());
      } else {
        expect(r.status).toBe('CANCELLED');
        expect(r.cancelledAt!.getTime()).toBeGreaterThanOrEqual(r.expiresAt.getTime());
      }
    }
  });
});

describe('POST /admin/orders/extend', () => {
  it('extends the unpaid orders of the range in one statement, paid and cancelled ones untouched', async () => {
    const shop = () => request.agent(svc.url).set(bearer(incidentKey));
    const inRange = await Promise.all([create(30, shop()), create(30, shop())]);
    const paid = await create(30, shop());
    await shop().post(`/orders/${paid.id}/pay`).send({});
    const cancelled = await create(30, shop());
    await shop().post(`/orders/${cancelled.id}/cancel`);
    const later = await create(90, shop());
    const foreign = await create(30, request.agent(svc.url).set(bearer(otherKey)));
    const from = new Date(Math.min(...inRange.map((o) => o.expiresAt), paid.expiresAt, cancelled.expiresAt, foreign.expiresAt) - 1);
    const to = new Date(later.expiresAt - 10_000);
    const res = await extend({ expiringFrom: from.toISOString(), expiringTo: to.toISOString(), extendBySeconds: 60, client: 'shop-c' });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ extended: inRange.length });
    for (const o of inRange) {
      expect((await row(o.id)).expiresAt.getTime()).toBe(o.expiresAt + 60_000);
      expect(await jobDue(o.id)).toBe(o.expiresAt + 60_000);
    }
    for (const o of [paid, cancelled, later, foreign]) expect((await row(o.id)).expiresAt.getTime()).toBe(o.expiresAt);
    // Without the client filter, the other client's order too.
    const all = await extend({ expiringFrom: from.toISOString(), expiringTo: to.toISOString(), extendBySeconds: 5 });
    expect(all.body.extended).toBeGreaterThanOrEqual(1);
    expect((await row(foreign.id)).expiresAt.getTime()).toBe(foreign.expiresAt + 5_000);
  });

  it('gives the window back to an order past its deadline not yet cancelled', async () => {
    const o = await create(1);
    await orders().queue.cancel(expireJobId(o.id)); // its expiry held up (Redis lost it, or a backlog)
    await sleep(Math.max(0, o.expiresAt - Date.now()) + 200);
    const res = await extend({
      expiringFrom: new Date(o.expiresAt - 1).toISOString(),
      expiringTo: new Date(o.expiresAt + 1).toISOString(),
      extendBySeconds: 30,
    });
    expect(res.body).toEqual({ extended: 1 });
    expect(await jobDue(o.id)).toBe(o.expiresAt + 30_000);
    const pay = await api().post(`/orders/${o.id}/pay`).send({});
    expect([pay.status, pay.body.status]).toEqual([200, 'PAID']);
  });

  it('refuses bad input (400) and callers without the admin token (401), extending nothing', async () => {
    const o = await create(30);
    const at = (ms: number) => new Date(o.expiresAt + ms).toISOString();
    const bad: unknown[] = [
      {},
      { expiringFrom: at(-1), expiringTo: at(1) },
      { expiringFrom: at(1), expiringTo: at(-1), extendBySeconds: 10 },
      { expiringFrom: at(-1), expiringTo: at(1), extendBySeconds: 0 },
      { expiringFrom: 'yesterday', expiringTo: at(1), extendBySeconds: 10 },
      { expiringFrom: '0000-01-01T00:00:00Z', expiringTo: at(1), extendBySeconds: 10 },
      { expiringFrom: at(-1), expiringTo: at(1), extendBySeconds: 10, client: 'no spaces allowed' },
      { expiringFrom: at(-1), expiringTo: at(1), extendBySeconds: 10, extra: true },
    ];
    for (const body of bad) expect([body, (await extend(body)).status]).toEqual([body, 400]);
    const ok = { expiringFrom: at(-1), expiringTo: at(1), extendBySeconds: 10 };
    expect((await extend(ok, 'not-the-admin-token-0123456789abcdef')).status).toBe(401);
    expect((await api().post('/admin/orders/extend').send(ok)).status).toBe(401);
    expect((await row(o.id)).expiresAt.getTime()).toBe(o.expiresAt);
  });
});
