// A payment reminder given up (FAILED, its delivery job dead) whose
// deadline moves away and back to the very same instant is taken back
// (PENDING, attempts from 0, docs/api/orders.md "The payment reminder"); its
// delivery must then be scheduled afresh, since the row's earlier job is in
// the dead set (a schedule "only if absent" finds it there and writes nothing),
// also when the take-back's job died before its dispatch and runs again.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deliverJobId } from '../../../src/modules/notifications/notifications.jobs.js';
import type { OrdersService } from '../../../src/modules/orders/orders.service.js';
import { writePaymentReminders } from '../../../src/modules/orders/sql/write-payment-reminders.js';
import { orderBody } from '../../helpers/bodies.js';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { waitFor } from '../../helpers/redis.js';
import { startTestService, stopTestService, type TestService } from '../../helpers/service.js';
import { startWebhook, type Webhook } from '../../helpers/webhook.js';

const SECRET = `whsec_${randomBytes(24).toString('base64')}`;
let tdb: TestDb;
let svc: TestService;
let hook: Webhook;

beforeAll(async () => {
  tdb = await createTestDb('orders_review_takeback');
  hook = await startWebhook();
  svc = await startTestService(tdb.url, {
    NOTIFY_ORDERS_WEBHOOK_URL: hook.url,
    NOTIFY_ORDERS_WEBHOOK_SECRET: SECRET,
    NOTIFY_RETRY_DELAYS_MS: '200',
    NOTIFY_MAX_ATTEMPTS: '2',
    ORDER_RECONCILE_INTERVAL_SECONDS: '3600',
    ORDER_RECONCILE_GRACE_SECONDS: '0',
  });
});
afterAll(async () => {
  await stopTestService(svc, tdb);
  await hook?.close();
});

const api = () => svc.api();
const notificationsQueue = () => svc.module('notifications').queue;
const ordersService = () => (svc.module('orders') as unknown as { service: OrdersService }).service;
const reminders = (orderId: string) => tdb.db.notification.findMany({ where: { orderId, kind: 'ORDER_PAYMENT_REMINDER' }, orderBy: { createdAt: 'asc' } });
const callsFor = (orderId: string) =>
  hook.calls.filter((c) => c.body.kind === 'ORDER_PAYMENT_REMINDER' && (c.body as { payload?: { orderId?: string } }).payload?.orderId === orderId);

describe('a payment reminder taken back after it was given up', () => {
  it('is delivered again when its deadline comes back', async () => {
    const { id, x, failedCalls } = await givenUp();
    const [r] = await reminders(id);
    const back = await api().patch(`/orders/${id}`).send({ expiresAt: x });
    expect(back.status).toBe(200);
    // Its reminder time has passed: the job comes at once, takes the reminder back and delivers it afresh.
    const delivered = await waitFor(async () => (await reminders(id))[0]?.status === 'SENT', 6_000, 20);
    expect(delivered, JSON.stringify({ rows: await reminders(id), job: await notificationsQueue().get(deliverJobId(r!.id)) })).toBe(true);
    expect(callsFor(id).length).toBe(failedCalls + 1);
    expect((await reminders(id))[0]?.attempts).toBe(1); // counted from 0 again
  }, 30_000);

  it('is delivered when its job runs again after dying between the take-back and the dispatch', async () => {
    const { id } = await givenUp();
    const [r] = await reminders(id);
    // The deadline back by hand (no job moved), the reminder taken back by the writer alone: what a job that died before its dispatch left.
    await tdb.db
      .$executeRaw`UPDATE orders SET expires_at = expires_at - interval '30 s', payment_remind_at = payment_remind_at - interval '30 s' WHERE id = ${id}::uuid`;
    expect((await writePaymentReminders(tdb.db, [id])).get(id)?.kind).toBe('written');
    expect((await reminders(id))[0]?.status).toBe('PENDING');
    // The job's rerun: the reminder is found PENDING and handed over afresh (its delivery job is dead).
    expect((await ordersService().remindMany([id])).get(id)?.kind).toBe('pending');
    const delivered = await waitFor(async () => (await reminders(id))[0]?.status === 'SENT', 6_000, 20);
    expect(delivered, JSON.stringify({ rows: await reminders(id), job: await notificationsQueue().get(deliverJobId(r!.id)) })).toBe(true);
  }, 30_000);
});

describe('a payment reminder found PENDING by its job run again', () => {
  it('leaves a delivery waiting out its backoff alone: its attempts go on, not from 0', async () => {
    const res = await api()
      .post('/orders')
      .send(orderBody({ paymentTimeoutSeconds: 10, paymentReminderBeforeSeconds: 9 }));
    expect(res.status).toBe(201);
    const id = res.body.id as string;
    const mine = (body: unknown) => (body as { payload?: { orderId?: string } }).payload?.orderId === id;
    // Its first call fails slowly; meanwhile the queue is paused, so the retry waits, claimed by nobody.
    hook.setBehaviour((_n, body) => (mine(body) ? { slowMs: 800, then: 'fail' } : 'ok'));
    expect(await waitFor(() => callsFor(id).length === 1, 6_000, 10)).toBe(true);
    await notificationsQueue().pause();
    try {
      expect(await waitFor(async () => (await reminders(id))[0]?.attempts === 1, 5_000, 20)).toBe(true);
      const [r] = await reminders(id);
      expect(r?.status).toBe('PENDING');
      const before = await notificationsQueue().get(deliverJobId(r!.id));
      expect(before).toMatchObject({ state: 'pending', attempts: 1 });
      // The reminder job's rerun finds it PENDING: the waiting delivery is kept as it is.
      expect((await ordersService().remindMany([id])).get(id)?.kind).toBe('pending');
      expect(await notificationsQueue().get(deliverJobId(r!.id))).toMatchObject({ state: 'pending', attempts: 1, dueAt: before!.dueAt });
    } finally {
      hook.setBehaviour(() => 'ok');
      await notificationsQueue().resume();
    }
    expect(await waitFor(async () => (await reminders(id))[0]?.status === 'SENT', 6_000, 20)).toBe(true);
    expect(callsFor(id).length).toBe(2);
  }, 30_000);
});

/** An order whose reminder was given up (FAILED, its delivery job dead), then its deadline moved away 30 s (the reminder withdrawn: CANCELLED). */
async function givenUp(): Promise<{ id: string; x: string; failedCalls: number }> {
  const res = await api()
    .post('/orders')
    .send(orderBody({ paymentTimeoutSeconds: 10, paymentReminderBeforeSeconds: 9 }));
  expect(res.status).toBe(201);
  const id = res.body.id as string;
  const x = res.body.expiresAt as string;
  hook.setBehaviour((_n, body) => ((body as { payload?: { orderId?: string } }).payload?.orderId === id ? 'fail' : 'ok'));
  expect(await waitFor(async () => (await reminders(id))[0]?.status === 'FAILED', 6_000, 20)).toBe(true);
  const [r] = await reminders(id);
  expect(await waitFor(async () => (await notificationsQueue().get(deliverJobId(r!.id)))?.state === 'dead', 3_000, 20)).toBe(true);
  const failedCalls = callsFor(id).length;
  hook.setBehaviour(() => 'ok');
  expect((await api().patch(`/orders/${id}`).send({ extendBySeconds: 30 })).status).toBe(200);
  expect((await reminders(id))[0]?.status).toBe('CANCELLED');
  return { id, x, failedCalls };
}
