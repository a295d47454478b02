// Orders end to end through HTTP: life cycle with short payment windows,
// idempotent create, and every validation error path as a 4xx problem.
import type { Test } from 'supertest';
import type { RedisClient } from '../../../src/core/redis.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { redisClient, sleep, waitFor } from '../../helpers/redis.js';
import { orderBody } from '../../helpers/bodies.js';
import { expireJobId } from '../../../src/modules/orders/orders.service.js';
import { startTestService, stopTestService, type TestService } from '../../helpers/service.js';

let tdb: TestDb;
let svc: TestService;
let redis: RedisClient;

beforeAll(async () => {
  tdb = await createTestDb('orders_api');
  svc = await startTestService(tdb.url, { ORDER_RECONCILE_INTERVAL_SECONDS: '3600' });
  redis = redisClient('orders-api-test');
});
afterAll(async () => {
  redis.disconnect();
  await stopTestService(svc, tdb);
});

const body = (extra: Record<string, unknown> = {}) =>
  orderBody({
    customerId: 'cust-1',
    items: [
      { sku: 'SKU-1', quantity: 2, unitPriceCents: 1_250 },
      { sku: 'SKU-2', quantity: 1, unitPriceCents: 499 },
    ],
    ...extra,
  });

const api = () => svc.api();
const jobKey = (id: string) => expireJobId(id);
async function expiryJob(id: string) {
  return svc.module('orders').queue.get(jobKey(id));
}

describe('order life cycle', () => {
  it('creates an unpaid order with its expiry job', async () => {
    const res = await api()
      .post('/orders')
      .send(body({ paymentTimeoutSeconds: 60 }));
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({
      status: 'UNPAID',
      totalCents: 2 * 1_250 + 499,
      currency: 'CNY',
      customerId: 'cust-1',
      items: [
        { sku: 'SKU-1', quantity: 2, unitPriceCents: 1_250 },
        { sku: 'SKU-2', quantity: 1, unitPriceCents: 499 },
      ],
      paidAt: null,
      cancelledAt: null,
      cancelReason: null,
    });
    const window = Date.parse(res.body.expiresAt) - Date.parse(res.body.createdAt);
    expect(window).toBe(60_000);
    expect(res.headers.location).toBe(`/orders/${res.body.id}`);
    const job = await expiryJob(res.body.id);
    expect(job).toMatchObject({ state: 'pending', type: 'order.expire', dueAt: Date.parse(res.body.expiresAt) });
    const got = await api().get(`/orders/${res.body.id}`);
    expect(got.status).toBe(200);
    expect(got.body).toEqual(res.body);
  });

  it('cancels an unpaid order when its window closes, once, with one notification', async () => {
    const res = await api()
      .post('/orders')
      .send(body({ paymentTimeoutSeconds: 1, currency: 'usd' }));
    expect(res.body.currency).toBe('USD');
    const id = res.body.id as string;
    expect(await waitFor(async () => (await api().get(`/orders/${id}`)).body.status === 'CANCELLED', 5_000, 25)).toBe(true);
    const o = (await api().get(`/orders/${id}`)).body;
    expect(o.cancelReason).toBe('PAYMENT_TIMEOUT');
    expect(Date.parse(o.cancelledAt)).toBeGreaterThanOrEqual(Date.parse(o.expiresAt));
    const notes = await tdb.db.notification.findMany({ where: { orderId: id } });
    expect(notes).toHaveLength(1);
    expect(notes[0]).toMatchObject({ kind: 'ORDER_CANCELLED', dedupeKey: `order-cancelled:${id}` });
    // Handed to delivery (the log notifier here) right after the cancellation.
    expect(await waitFor(async () => (await tdb.db.notification.findFirst({ where: { orderId: id } }))?.status === 'SENT', 3_000, 25)).toBe(true);
    const listed = await api().get(`/notifications?orderId=${id}`);
    expect(listed.status).toBe(200);
    expect(listed.body.notifications).toMatchObject([{ kind: 'ORDER_CANCELLED', status: 'SENT', attempts: 1, orderId: id }]);
    expect(await expiryJob(id)).toBeNull();
    // Paying now is refused: cancelled for good.
    const pay = await api().post(`/orders/${id}/pay`).send({});
    expect(pay.status).toBe(409);
    expect(pay.body.code).toBe('ORDER_NOT_PAYABLE');
  });

  it('pays in time: PAID for good, expiry job removed, paying again answers the same', async () => {
    const id = (
      await api()
        .post('/orders')
        .send(body({ paymentTimeoutSeconds: 2 }))
    ).body.id as string;
    const pay = await api().post(`/orders/${id}/pay`).send({ paymentRef: 'psp-123' });
    expect(pay.status).toBe(200);
    expect(pay.body).toMatchObject({ status: 'PAID', paymentRef: 'psp-123' });
    expect(pay.body.paidAt).not.toBeNull();
    expect(await expiryJob(id)).toBeNull();
    const again = await api().post(`/orders/${id}/pay`);
    expect(again.status).toBe(200);
    expect(again.body).toEqual(pay.body);
    await sleep(2_300); // past the old deadline: still PAID, no notification
    expect((await api().get(`/orders/${id}`)).body.status).toBe('PAID');
    expect(await tdb.db.notification.count({ where: { orderId: id } })).toBe(0);
    const cancel = await api().post(`/orders/${id}/cancel`);
    expect(cancel.status).toBe(409);
    expect(cancel.body.code).toBe('ORDER_NOT_CANCELLABLE');
  });

  it('refuses payment after the deadline even before the cancellation ran', async () => {
    const id = (
      await api()
        .post('/orders')
        .send(body({ paymentTimeoutSeconds: 1 }))
    ).body.id as string;
    // Hold the expiry back so the order is past its deadline but still UNPAID.
    await svc.module('orders').queue.reschedule(jobKey(id), { delayMs: 60_000 });
    await sleep(1_100);
    expect((await api().get(`/orders/${id}`)).body.status).toBe('UNPAID');
    const pay = await api().post(`/orders/${id}/pay`).send({});
    expect(pay.status).toBe(409);
    expect(pay.body.code).toBe('ORDER_EXPIRED');
    expect((await api().get(`/orders/${id}`)).body.status).toBe('UNPAID');
  });

  it('lets the customer cancel an unpaid order, twice without harm', async () => {
    const id = (await api().post('/orders').send(body())).body.id as string;
    const c1 = await api().post(`/orders/${id}/cancel`);
    expect(c1.status).toBe(200);
    expect(c1.body).toMatchObject({ status: 'CANCELLED', cancelReason: 'CUSTOMER' });
    expect(await expiryJob(id)).toBeNull();
    const c2 = await api().post(`/orders/${id}/cancel`);
    expect(c2.status).toBe(200);
    expect(c2.body).toEqual(c1.body);
    expect(await tdb.db.notification.count({ where: { orderId: id } })).toBe(1);
  });

  it('answers 404 for an unknown order', async () => {
    const id = '00000000-0000-4000-8000-000000000000';
    for (const res of [await api().get(`/orders/${id}`), await api().post(`/orders/${id}/pay`), await api().post(`/orders/${id}/cancel`)]) {
      expect(res.status).toBe(404);
      expect(res.body.code).toBe('ORDER_NOT_FOUND');
    }
  });
});

describe('idempotent create', () => {
  it('returns the same order for the same key and body, with one job', async () => {
    const key = `key-${Date.now()}`;
    const a = await api().post('/orders').set('Idempotency-Key', key).send(body());
    // Same body with keys in another order and the default currency spelled out.
    const b = await api().post('/orders').set('Idempotency-Key', key).send({ currency: 'CNY', items: body().items, customerId: 'cust-1' });
    expect(a.status).toBe(201);
    expect(b.status).toBe(201);
    expect(b.headers['idempotent-replayed']).toBe('true');
    expect(b.body).toEqual(a.body);
    expect(await tdb.db.order.count({ where: { idempotencyKey: { endsWith: `/${key}` } } })).toBe(1);
    expect(await expiryJob(a.body.id)).not.toBeNull();
  });

  it('refuses the same key with a different body', async () => {
    const key = `key2-${Date.now()}`;
    await api().post('/orders').set('Idempotency-Key', key).send(body());
    const res = await api()
      .post('/orders')
      .set('Idempotency-Key', key)
      .send(body({ customerId: 'someone-else' }));
    expect(res.status).toBe(422);
    expect(res.body.code).toBe('IDEMPOTENCY_KEY_REUSED');
  });

  it('creates one order when concurrent requests share a key', async () => {
    const key = `key3-${Date.now()}`;
    const replies = await Promise.all(Array.from({ length: 8 }, () => api().post('/orders').set('Idempotency-Key', key).send(body())));
    expect(replies.map((r) => r.status)).toEqual(Array(8).fill(201));
    expect(new Set(replies.map((r) => r.body.id)).size).toBe(1);
    expect(await tdb.db.order.count({ where: { idempotencyKey: { endsWith: `/${key}` } } })).toBe(1);
  });
});

describe('bad input: 4xx problem+json, nothing written', () => {
  const big = 'x'.repeat(65);
  const cases: [string, () => Test, number, string][] = [
    ['no body', () => api().post('/orders'), 400, 'VALIDATION_FAILED'],
    ['malformed JSON', () => api().post('/orders').set('content-type', 'application/json').send('{"customerId":'), 400, 'INVALID_JSON'],
    [
      'empty customerId',
      () =>
        api()
          .post('/orders')
          .send(body({ customerId: '' })),
      400,
      'VALIDATION_FAILED',
    ],
    [
      'customerId too long',
      () =>
        api()
          .post('/orders')
          .send(body({ customerId: big })),
      400,
      'VALIDATION_FAILED',
    ],
    [
      'NUL in customerId',
      () =>
        api()
          .post('/orders')
          .send(body({ customerId: 'a\u0000b' })),
      400,
      'VALIDATION_FAILED',
    ],
    ['NUL in paymentRef', () => api().post('/orders/00000000-0000-4000-8000-000000000000/pay').send({ paymentRef: 'r\u0000' }), 400, 'VALIDATION_FAILED'],
    [
      'no items',
      () =>
        api()
          .post('/orders')
          .send(body({ items: [] })),
      400,
      'VALIDATION_FAILED',
    ],
    [
      '101 items',
      () =>
        api()
          .post('/orders')
          .send(body({ items: Array(101).fill({ sku: 'a', quantity: 1, unitPriceCents: 1 }) })),
      400,
      'VALIDATION_FAILED',
    ],
    [
      'quantity 0',
      () =>
        api()
          .post('/orders')
          .send(body({ items: [{ sku: 'a', quantity: 0, unitPriceCents: 1 }] })),
      400,
      'VALIDATION_FAILED',
    ],
    [
      'quantity 1001',
      () =>
        api()
          .post('/orders')
          .send(body({ items: [{ sku: 'a', quantity: 1001, unitPriceCents: 1 }] })),
      400,
      'VALIDATION_FAILED',
    ],
    [
      'fractional quantity',
      () =>
        api()
          .post('/orders')
          .send(body({ items: [{ sku: 'a', quantity: 1.5, unitPriceCents: 1 }] })),
      400,
      'VALIDATION_FAILED',
    ],
    [
      'negative price',
      () =>
        api()
          .post('/orders')
          .send(body({ items: [{ sku: 'a', quantity: 1, unitPriceCents: -1 }] })),
      400,
      'VALIDATION_FAILED',
    ],
    [
      'price as a string',
      () =>
        api()
          .post('/orders')
          .send(body({ items: [{ sku: 'a', quantity: 1, unitPriceCents: '5' }] })),
      400,
      'VALIDATION_FAILED',
    ],
    [
      'sku too long',
      () =>
        api()
          .post('/orders')
          .send(body({ items: [{ sku: big, quantity: 1, unitPriceCents: 1 }] })),
      400,
      'VALIDATION_FAILED',
    ],
    [
      'currency of 4 letters',
      () =>
        api()
          .post('/orders')
          .send(body({ currency: 'EURO' })),
      400,
      'VALIDATION_FAILED',
    ],
    [
      'timeout 0',
      () =>
        api()
          .post('/orders')
          .send(body({ paymentTimeoutSeconds: 0 })),
      400,
      'VALIDATION_FAILED',
    ],
    [
      'timeout above a week',
      () =>
        api()
          .post('/orders')
          .send(body({ paymentTimeoutSeconds: 604_801 })),
      400,
      'VALIDATION_FAILED',
    ],
    [
      'unknown field',
      () =>
        api()
          .post('/orders')
          .send(body({ discount: 5 })),
      400,
      'VALIDATION_FAILED',
    ],
    ['body is an array', () => api().post('/orders').send([body()]), 400, 'VALIDATION_FAILED'],
    [
      'oversized body',
      () =>
        api()
          .post('/orders')
          .send(body({ customerId: 'x'.repeat(70_000) })),
      413,
      'PAYLOAD_TOO_LARGE',
    ],
    ['Idempotency-Key with a tab', () => api().post('/orders').set('Idempotency-Key', 'key\twith-tab').send(body()), 400, 'INVALID_IDEMPOTENCY_KEY'],
    ['Idempotency-Key too long', () => api().post('/orders').set('Idempotency-Key', 'k'.repeat(256)).send(body()), 400, 'INVALID_IDEMPOTENCY_KEY'],
    ['order id not a UUID', () => api().get('/orders/12345'), 400, 'INVALID_ORDER_ID'],
    ['pay with a bad ref', () => api().post('/orders/00000000-0000-4000-8000-000000000000/pay').send({ paymentRef: '' }), 400, 'VALIDATION_FAILED'],
    ['pay with unknown field', () => api().post('/orders/00000000-0000-4000-8000-000000000000/pay').send({ amount: 1 }), 400, 'VALIDATION_FAILED'],
  ];

  it.each(cases)('%s', async (_label, send, status, code) => {
    const before = await tdb.db.order.count();
    const res = await send();
    expect(res.status).toBe(status);
    expect(res.headers['content-type']).toMatch(/application\/problem\+json/);
    expect(res.body).toMatchObject({ status, code });
    expect(await tdb.db.order.count()).toBe(before);
  });
});
