// Each notification kind's delivery job runs at its kind's priority
// (notification-priority.ts): handed over by the dispatch after a commit or by
// the relay, an order-cancelled notice waiting beside a burst of reminders and
// batch notices is called first.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NotificationDispatch } from '../../../src/core/delivery/index.js';
import { DELIVER_JOB, deliverJobId } from '../../../src/modules/notifications/notifications.jobs.js';
import { type PRIORITY_BY_KIND } from '../../../src/modules/notifications/notification-priority.js';
import { orderBody } from '../../helpers/bodies.js';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { waitFor } from '../../helpers/redis.js';
import { startTestService, stopTestService, type TestService } from '../../helpers/service.js';
import { startWebhook, type Webhook } from '../../helpers/webhook.js';

const CONCURRENCY = 2;

let tdb: TestDb;
let svc: TestService;
let hook: Webhook;
beforeAll(async () => {
  tdb = await createTestDb('notify_priority');
  hook = await startWebhook();
  svc = await startTestService(tdb.url, {
    NOTIFY_WEBHOOK_URL: hook.url,
    DELIVERY_CONCURRENCY: String(CONCURRENCY),
    WORKER_IDLE_RECHECK_MS: '200',
    NOTIFY_RELAY_INTERVAL_SECONDS: '3600',
  });
}, 60_000);
afterAll(async () => {
  await stopTestService(svc, tdb);
  await hook?.close();
});

type NotificationsModule = { queue: ReturnType<TestService['module']>['queue'] } & {
  dispatch: NotificationDispatch;
  relay: { run(): Promise<{ handed: number; abandoned: number }> };
};
const notifications = () => svc.module('notifications') as unknown as NotificationsModule;

type Kind = keyof typeof PRIORITY_BY_KIND;
async function rows(kind: Kind, n: number, createdAt = new Date()): Promise<string[]> {
  const ids = Array.from({ length: n }, () => randomUUID());
  await tdb.db.notification.createMany({ data: ids.map((id) => ({ id, kind, dedupeKey: `prio:${id}`, payload: {}, createdAt })) });
  return ids;
}

describe('notification priorities', () => {
  it('runs order-cancelled notices ahead of reminders and batch notices handed over with them, dispatched or relayed', async () => {
    const q = notifications().queue!;
    await q.pause(DELIVER_JOB);
    try {
      const reminders = await rows('APPOINTMENT_REMINDER', 30);
      const batches = await rows('BATCH_DISPATCHED', 10);
      const cancelled = await rows('ORDER_CANCELLED', 3);
      const payment = await rows('ORDER_PAYMENT_REMINDER', 2);
      await notifications().dispatch([...reminders, ...batches]);
      await notifications().dispatch([...cancelled, ...payment]);
      // Rows whose dispatch was lost: the relay hands them over at their kind's priority too.
      const old = new Date(Date.now() - 60_000);
      const relayedCancel = await rows('ORDER_CANCELLED', 1, old);
      const relayedReminder = await rows('APPOINTMENT_REMINDER', 1, old);
      await notifications().relay.run();
      const priorityOf = async (id: string) => (await q.get(deliverJobId(id)))?.priority;
      expect(await priorityOf(cancelled[0]!)).toBe(8);
      expect(await priorityOf(payment[0]!)).toBe(6);
      expect(await priorityOf(reminders[0]!)).toBe(5);
      expect(await priorityOf(batches[0]!)).toBe(5);
      expect(await priorityOf(relayedCancel[0]!)).toBe(8);
      expect(await priorityOf(relayedReminder[0]!)).toBe(5);

      const urgent = [...cancelled, ...relayedCancel];
      const all = [...reminders, ...batches, ...cancelled, ...payment, ...relayedCancel, ...relayedReminder];
      await q.resume(DELIVER_JOB);
      const mine = new Set(all);
      const order = () => hook.delivered.map((c) => String(c.body.id)).filter((id) => mine.has(id));
      expect(await waitFor(() => order().length === all.length, 20_000, 20)).toBe(true);
      // Within what one claim hands the workers at once, the urgent ones come first.
      const firstUrgent = order().slice(0, urgent.length + payment.length + CONCURRENCY);
      for (const id of urgent) expect(firstUrgent, `order-cancelled notice ${id} called late`).toContain(id);
    } finally {
      await q.resume(DELIVER_JOB);
    }
  });

  it("gives a notice a domain hands over its kind's priority (the order's cancel names its kind)", async () => {
    const q = notifications().queue!;
    await q.pause(DELIVER_JOB);
    try {
      const created = await svc.api().post('/orders').send(orderBody());
      expect(created.status).toBe(201);
      expect((await svc.api().post(`/orders/${created.body.id}/cancel`)).status).toBe(200);
      const notice = await tdb.db.notification.findFirstOrThrow({ where: { orderId: created.body.id, kind: 'ORDER_CANCELLED' } });
      expect(await waitFor(async () => (await q.get(deliverJobId(notice.id)))?.priority === 8, 3_000, 20)).toBe(true);
    } finally {
      await q.resume(DELIVER_JOB);
    }
  });
});
