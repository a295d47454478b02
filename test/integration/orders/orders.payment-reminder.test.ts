// The payment reminder of an unpaid order (ORDER_PAYMENT_REMINDER) through
// HTTP and a local receiver: written at its deadline minus the lead and
// delivered signed, none for an order paid or cancelled before, moved with
// the deadline (and again after a move once sent), withdrawn when the order
// is paid or expires while it waits, the per-order lead and none, the lead's bad input,
// the reconciliation pass writing one whose job Redis lost.
import { randomBytes } from 'node:crypto';
import { Webhook as Verifier } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Prisma } from '../../../src/generated/prisma/client.js';
import { dedupeKey, dedupeKeySql } from '../../../src/core/delivery/index.js';
import type { createOrdersModule } from '../../../src/modules/orders/orders.module.js';
import { remindJobId } from '../../../src/modules/orders/orders.service.js';
import { orderBody } from '../../helpers/bodies.js';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { sleep, waitFor } from '../../helpers/redis.js';
import { startTestService, stopTestService, type TestService } from '../../helpers/service.js';
import { startWebhook, type Webhook } from '../../helpers/webhook.js';

const SECRET = `whsec_${randomBytes(24).toString('base64')}`;
let tdb: TestDb;
let svc: TestService;
let hook: Webhook;

beforeAll(async () => {
  tdb = await createTestDb('orders_reminder');
  hook = await startWebhook();
  svc = await startTestService(tdb.url, {
    PAYMENT_REMINDER_BEFORE_SECONDS: '1',
    NOTIFY_ORDERS_WEBHOOK_URL: hook.url,
    NOTIFY_ORDERS_WEBHOOK_SECRET: SECRET,
    NOTIFY_RETRY_DELAYS_MS: '300',
    ORDER_RECONCILE_INTERVAL_SECONDS: '3600',
    ORDER_RECONCILE_GRACE_SECONDS: '0',
  });
});
afterAll(async () => {
  await stopTestService(svc, tdb);
  await hook?.close();
});

const api = () => svc.api();
const orders = () => svc.module('orders') as ReturnType<typeof createOrdersModule>;
const reminders = (orderId: string) => tdb.db.notification.findMany({ where: { orderId, kind: 'ORDER_PAYMENT_REMINDER' }, orderBy: { createdAt: 'asc' } });
const callsFor = (orderId: string) =>
  hook.calls.filter((c) => c.body.kind === 'ORDER_PAYMENT_REMINDER' && (c.body as { payload?: { orderId?: string } }).payload?.orderId === orderId);
const until = (at: number) => sleep(Math.max(0, at - Date.now()));

async function create(extra: Record<string, unknown> = {}) {
  const res = await api()
    .post('/orders')
    .send(orderBody({ paymentTimeoutSeconds: 3, ...extra }));
  expect(res.status).toBe(201);
  return {
    id: res.body.id as string,
    expiresAt: Date.parse(res.body.expiresAt),
    remindAt: res.body.paymentRemindAt ? Date.parse(res.body.paymentRemindAt) : null,
    body: res.body,
  };
}

describe('the payment reminder', () => {
  it('is written at its time, delivered signed once, and kept SENT when the order then expires', async () => {
    const o = await create();
    expect(o.body.paymentReminderBeforeSeconds).toBe(1);
    expect(o.remindAt).toBe(o.expiresAt - 1_000);
    await until(o.remindAt! - 300);
    expect(await reminders(o.id)).toHaveLength(0);
    expect(await waitFor(async () => (await reminders(o.id))[0]?.status === 'SENT', 5_000, 20)).toBe(true);
    const [n] = await reminders(o.id);
    expect(n!.createdAt.getTime()).toBeGreaterThanOrEqual(o.remindAt!);
    expect(n!.dedupeKey).toBe(dedupeKey.orderPaymentReminder(o.id, o.expiresAt));
    const calls = callsFor(o.id);
    expect(calls).toHaveLength(1);
    new Verifier(SECRET).verify(calls[0]!.raw, calls[0]!.headers);
    expect(calls[0]!.body).toMatchObject({
      id: n!.id,
      kind: 'ORDER_PAYMENT_REMINDER',
      payload: { orderId: o.id, expiresAt: new Date(o.expiresAt).toISOString() },
    });
    expect(await waitFor(async () => (await tdb.db.order.findUniqueOrThrow({ where: { id: o.id } })).status === 'CANCELLED', 5_000, 50)).toBe(true);
    expect((await reminders(o.id)).map((r) => r.status)).toEqual(['SENT']);
  });

  it('is not written for an order paid or cancelled before its time, though its job runs then', async () => {
    const paid = await create();
    const cancelled = await create();
    expect((await api().post(`/orders/${paid.id}/pay`).send({})).status).toBe(200);
    expect((await api().post(`/orders/${cancelled.id}/cancel`)).status).toBe(200);
    // The job stays; the reminder's own statement refuses a settled order.
    expect((await orders().queue.get(remindJobId(paid.id)))?.dueAt).toBe(paid.remindAt);
    await until(paid.remindAt! + 100);
    expect(await waitFor(async () => (await orders().queue.get(remindJobId(paid.id))) === null, 3_000, 20)).toBe(true);
    await until(cancelled.expiresAt + 300);
    for (const o of [paid, cancelled]) {
      expect(await reminders(o.id)).toHaveLength(0);
      expect(callsFor(o.id)).toHaveLength(0);
    }
  });

  it('moves with the deadline, the old time writing nothing; and reminds again for a deadline moved after it was sent', async () => {
    const o = await create();
    const moved = await api().patch(`/orders/${o.id}`).send({ extendBySeconds: 2 });
    expect(moved.status).toBe(200);
    expect(Date.parse(moved.body.paymentRemindAt)).toBe(o.remindAt! + 2_000);
    await until(o.remindAt! + 500);
    expect(await reminders(o.id)).toHaveLength(0);
    expect(await waitFor(async () => (await reminders(o.id))[0]?.status === 'SENT', 5_000, 20)).toBe(true);
    expect((await reminders(o.id))[0]!.createdAt.getTime()).toBeGreaterThanOrEqual(o.remindAt! + 2_000);
    const again = await api().patch(`/orders/${o.id}`).send({ extendBySeconds: 2 });
    expect(again.status).toBe(200);
    expect(await waitFor(async () => (await reminders(o.id)).length === 2, 6_000, 20)).toBe(true);
    expect((await reminders(o.id)).map((r) => r.dedupeKey)).toEqual([
      dedupeKey.orderPaymentReminder(o.id, o.expiresAt + 2_000),
      dedupeKey.orderPaymentReminder(o.id, o.expiresAt + 4_000),
    ]);
  });

  it('is withdrawn when the order is paid while it waits to be delivered', async () => {
    const o = await create({ paymentTimeoutSeconds: 4, paymentReminderBeforeSeconds: 3 });
    hook.setBehaviour((_n, body) => ((body as { payload?: { orderId?: string } }).payload?.orderId === o.id ? 'fail' : 'ok'));
    try {
      expect(await waitFor(() => callsFor(o.id).length >= 1, 5_000, 10)).toBe(true);
      expect((await api().post(`/orders/${o.id}/pay`).send({})).status).toBe(200);
      const [n] = await reminders(o.id);
      // Withdrawn at once, or (its call running at the pay) ended CANCELLED by that call's failure.
      expect(await waitFor(async () => (await reminders(o.id))[0]?.status === 'CANCELLED', 3_000, 20)).toBe(true);
      const calls = callsFor(o.id).length;
      await sleep(1_000);
      expect(callsFor(o.id).length).toBe(calls);
      expect((await tdb.db.notification.findUniqueOrThrow({ where: { id: n!.id } })).withdrawnAt).not.toBeNull();
    } finally {
      hook.setBehaviour(() => 'ok');
    }
  });

  it('is withdrawn when the order expires while it waits to be delivered', async () => {
    const o = await create({ paymentTimeoutSeconds: 3, paymentReminderBeforeSeconds: 2 });
    hook.setBehaviour((_n, body) => ((body as { payload?: { orderId?: string } }).payload?.orderId === o.id ? 'fail' : 'ok'));
    try {
      expect(await waitFor(() => callsFor(o.id).length >= 1, 5_000, 10)).toBe(true);
      await until(o.expiresAt);
      expect(await waitFor(async () => (await api().get(`/orders/${o.id}`)).body.status === 'CANCELLED', 3_000, 20)).toBe(true);
      // Withdrawn by the expiry, or (its call running then) ended CANCELLED by that call's failure.
      expect(await waitFor(async () => (await reminders(o.id))[0]?.status === 'CANCELLED', 3_000, 20)).toBe(true);
      const calls = callsFor(o.id).length;
      await sleep(1_000);
      expect(callsFor(o.id).length).toBe(calls);
      const [n] = await reminders(o.id);
      expect(n!.withdrawnAt).not.toBeNull();
    } finally {
      hook.setBehaviour(() => 'ok');
    }
  });

  it('is withdrawn when the deadline moves while it waits, and written again for the new deadline', async () => {
    const o = await create({ paymentTimeoutSeconds: 4, paymentReminderBeforeSeconds: 3 });
    hook.setBehaviour((_n, body) => ((body as { payload?: { orderId?: string } }).payload?.orderId === o.id ? 'fail' : 'ok'));
    try {
      expect(await waitFor(() => callsFor(o.id).length >= 1, 5_000, 10)).toBe(true);
      expect((await api().patch(`/orders/${o.id}`).send({ extendBySeconds: 3 })).status).toBe(200);
      expect(await waitFor(async () => (await reminders(o.id))[0]?.status === 'CANCELLED', 3_000, 20)).toBe(true);
    } finally {
      hook.setBehaviour(() => 'ok');
    }
    expect(await waitFor(async () => (await reminders(o.id))[1]?.status === 'SENT', 5_000, 20)).toBe(true);
    expect((await reminders(o.id)).map((r) => [r.dedupeKey, r.status])).toEqual([
      [dedupeKey.orderPaymentReminder(o.id, o.expiresAt), 'CANCELLED'],
      [dedupeKey.orderPaymentReminder(o.id, o.expiresAt + 3_000), 'SENT'],
    ]);
  });

  it('takes back the reminder withdrawn when the deadline moved away and back to the same instant', async () => {
    const o = await create({ paymentTimeoutSeconds: 6, paymentReminderBeforeSeconds: 4 });
    const at = new Date(o.expiresAt).toISOString();
    hook.setBehaviour((_n, body) => ((body as { payload?: { orderId?: string } }).payload?.orderId === o.id ? 'fail' : 'ok'));
    try {
      // Written and failed once: it waits for its retry, PENDING.
      expect(await waitFor(() => callsFor(o.id).length >= 1, 5_000, 10)).toBe(true);
      expect((await api().patch(`/orders/${o.id}`).send({ extendBySeconds: 3 })).status).toBe(200);
      expect(await waitFor(async () => (await reminders(o.id))[0]?.status === 'CANCELLED', 3_000, 20)).toBe(true);
    } finally {
      hook.setBehaviour(() => 'ok');
    }
    // Back to the first deadline, its reminder's time passed: the job runs at once and takes the row back.
    expect((await api().patch(`/orders/${o.id}`).send({ expiresAt: at })).status).toBe(200);
    expect(await waitFor(async () => (await reminders(o.id))[0]?.status === 'SENT', 4_000, 20)).toBe(true);
    const rows = await reminders(o.id);
    expect(rows.map((r) => [r.dedupeKey, r.status, r.withdrawnAt])).toEqual([[dedupeKey.orderPaymentReminder(o.id, o.expiresAt), 'SENT', null]]);
    expect(callsFor(o.id).filter((c) => c.body.id === rows[0]!.id).length).toBeGreaterThanOrEqual(2);
  });

  it('is taken back by the reconciliation pass when the job of a deadline moved away and back was lost', async () => {
    const o = await create({ paymentTimeoutSeconds: 8, paymentReminderBeforeSeconds: 6 });
    const at = new Date(o.expiresAt).toISOString();
    hook.setBehaviour((_n, body) => ((body as { payload?: { orderId?: string } }).payload?.orderId === o.id ? 'fail' : 'ok'));
    try {
      expect(await waitFor(() => callsFor(o.id).length >= 1, 5_000, 10)).toBe(true);
      expect((await api().patch(`/orders/${o.id}`).send({ extendBySeconds: 3 })).status).toBe(200);
      expect(await waitFor(async () => (await reminders(o.id))[0]?.status === 'CANCELLED', 3_000, 20)).toBe(true);
    } finally {
      hook.setBehaviour(() => 'ok');
    }
    // Moved back (the move's statement) with its reschedule lost and its job gone: only the pass can write it,
    // and the withdrawn row counts as none.
    await orders().queue.cancel(remindJobId(o.id));
    await tdb.db
      .$executeRaw`UPDATE orders SET expires_at = ${at}::timestamptz, payment_remind_at = ${at}::timestamptz - interval '6 s' WHERE id = ${o.id}::uuid`;
    expect((await reminders(o.id))[0]?.status).toBe('CANCELLED');
    expect((await orders().reconcile.run(60_000)).reminded).toBe(1);
    expect(await waitFor(async () => (await reminders(o.id))[0]?.status === 'SENT', 4_000, 20)).toBe(true);
    expect(await reminders(o.id)).toHaveLength(1);
  });

  it('has its job brought earlier by the reconciliation pass when a move earlier left it later', async () => {
    const o = await create({ paymentTimeoutSeconds: 60 });
    const to = Date.now() + 3_000;
    const moved = await api()
      .patch(`/orders/${o.id}`)
      .send({ expiresAt: new Date(to).toISOString() });
    expect(moved.status).toBe(200);
    // The reschedule Redis lost: the job left at the old, later time.
    await orders().queue.schedule({ id: remindJobId(o.id), type: 'order.remind', at: new Date(o.remindAt!), payload: {} });
    expect((await orders().reconcile.run(60_000)).jobsPulled).toBeGreaterThanOrEqual(1);
    expect((await orders().queue.get(remindJobId(o.id)))?.dueAt).toBe(to - 1_000);
    expect(await waitFor(async () => (await reminders(o.id))[0]?.status === 'SENT', 5_000, 20)).toBe(true);
    expect((await reminders(o.id))[0]!.createdAt.getTime()).toBeLessThan(to);
  });

  it('takes a per-order lead, or none (0), and none when the lead is not shorter than the window', async () => {
    const own = await create({ paymentReminderBeforeSeconds: 2 });
    expect(own.remindAt).toBe(own.expiresAt - 2_000);
    const byDefault = await create({ paymentReminderBeforeSeconds: null });
    expect(byDefault.remindAt).toBe(byDefault.expiresAt - 1_000);
    const none = await create({ paymentReminderBeforeSeconds: 0 });
    const tooLong = await create({ paymentReminderBeforeSeconds: 3 });
    for (const o of [none, tooLong]) expect(o.remindAt).toBeNull();
    expect(none.body.paymentReminderBeforeSeconds).toBeNull();
    expect(await orders().queue.get(remindJobId(none.id))).toBeNull();
    await until(none.expiresAt + 300);
    for (const o of [none, tooLong]) expect(await reminders(o.id)).toHaveLength(0);
    expect(await waitFor(async () => (await reminders(own.id)).length === 1, 3_000, 20)).toBe(true);
  });

  it('refuses a bad lead with a problem, writing no order', async () => {
    const before = await tdb.db.order.count();
    for (const lead of [-1, 86_401, 1.5, '60', true]) {
      const res = await api()
        .post('/orders')
        .send(orderBody({ paymentReminderBeforeSeconds: lead }));
      expect([lead, res.status, res.body.code]).toEqual([lead, 400, 'VALIDATION_FAILED']);
    }
    expect(await tdb.db.order.count()).toBe(before);
  });

  it('is written by the reconciliation pass when Redis lost its job', async () => {
    const o = await create();
    await orders().queue.cancel(remindJobId(o.id));
    await until(o.remindAt! + 100);
    expect(await reminders(o.id)).toHaveLength(0);
    expect((await orders().reconcile.run(60_000)).reminded).toBe(1);
    expect(await waitFor(async () => (await reminders(o.id))[0]?.status === 'SENT', 3_000, 20)).toBe(true);
  });

  it('keys one reminder per deadline, the same in TypeScript and SQL', async () => {
    const id = '0b5c8f0e-6c1d-4d7e-9d55-3f1c2f0e9a11';
    const at = new Date('2026-11-29T01:02:03.456Z');
    const [r] = await tdb.db.$queryRaw<
      { key: string }[]
    >`SELECT ${dedupeKeySql.orderPaymentReminder(Prisma.sql`${id}::text`, Prisma.sql`${at}::timestamptz`)} AS key`;
    expect(r!.key).toBe(dedupeKey.orderPaymentReminder(id, at.getTime()));
  });
});

describe('without PAYMENT_REMINDER_BEFORE_SECONDS', () => {
  it('gives an order no reminder unless it asks for one', async () => {
    const off = await startTestService(tdb.url, { ORDER_RECONCILE_INTERVAL_SECONDS: '3600' }, 'api');
    try {
      const plain = await off.api().post('/orders').send(orderBody());
      expect([plain.body.paymentReminderBeforeSeconds, plain.body.paymentRemindAt]).toEqual([null, null]);
      const asked = await off
        .api()
        .post('/orders')
        .send(orderBody({ paymentReminderBeforeSeconds: 60 }));
      expect(asked.body.paymentReminderBeforeSeconds).toBe(60);
      expect(Date.parse(asked.body.paymentRemindAt)).toBe(Date.parse(asked.body.expiresAt) - 60_000);
    } finally {
      await off.stop();
    }
  });
});
