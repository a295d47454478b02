// A payment reminder given up (FAILED, its delivery job dead) whose
// deadline moves away and back to the very same instant is taken back
// (PENDING, attempts from 0, docs/api/orders.md "The payment reminder"); its
// delivery must then be scheduled afresh, since the row's earlier job is in
// the dead set (a schedule "only if absent" finds it there and writes nothing).
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deliverJobId } from '../../../src/modules/notifications/notifications.jobs.js';
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
const reminders = (orderId: string) => tdb.db.notification.findMany({ where: { orderId, kind: 'ORDER_PAYMENT_REMINDER' }, orderBy: { createdAt: 'asc' } });
const callsFor = (orderId: string) =>
  hook.calls.filter((c) => c.body.kind === 'ORDER_PAYMENT_REMINDER' && (c.body as { payload?: { orderId?: string } }).payload?.orderId === orderId);

describe('a payment reminder taken back after it was given up', () => {
  it('is delivered again when its deadline comes back', async () => {
    const res = await api()
      .post('/orders')
      .send(orderBody({ paymentTimeoutSeconds: 10, paymentReminderBeforeSeconds: 9 }));
    expect(res.status).toBe(201);
    const id = res.body.id as string;
    const x = res.body.expiresAt as string;
    hook.setBehaviour((_n, body) => ((body as { payload?: { orderId?: string } }).payload?.orderId === id ? 'fail' : 'ok'));
    // Given up: FAILED after its two attempts, the delivery job dead.
    expect(await waitFor(async () => (await reminders(id))[0]?.status === 'FAILED', 6_000, 20)).toBe(true);
    const [r] = await reminders(id);
    expect(await waitFor(async () => (await notificationsQueue().get(deliverJobId(r!.id)))?.state === 'dead', 3_000, 20)).toBe(true);
    const failedCalls = callsFor(id).length;
    hook.setBehaviour(() => 'ok');
    // Away (the FAILED reminder withdrawn: CANCELLED) and back to the same instant.
    expect((await api().patch(`/orders/${id}`).send({ extendBySeconds: 30 })).status).toBe(200);
    expect((await reminders(id))[0]?.status).toBe('CANCELLED');
    const back = await api().patch(`/orders/${id}`).send({ expiresAt: x });
    expect(back.status).toBe(200);
    // Its reminder time has passed: the job comes at once, takes the reminder back and delivers it afresh.
    const delivered = await waitFor(async () => (await reminders(id))[0]?.status === 'SENT', 6_000, 20);
    expect(delivered, JSON.stringify({ rows: await reminders(id), job: await notificationsQueue().get(deliverJobId(r!.id)) })).toBe(true);
    expect(callsFor(id).length).toBe(failedCalls + 1);
    expect((await reminders(id))[0]?.attempts).toBe(1); // counted from 0 again
  }, 30_000);
});
