// The safety net: Redis loses every job (FLUSHALL on a private redis-server),
// and the reconciliation passes repair from PostgreSQL: overdue orders are
// cancelled, lost expiry and reminder jobs re-created, overdue reminders sent,
// and notifications whose delivery job was lost are delivered.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { waitFor } from '../../helpers/redis.js';
import { type PrivateRedis, startPrivateRedis } from '../../helpers/redis-server.js';
import { orderBody } from '../../helpers/bodies.js';
import { expireJobId } from '../../../src/modules/orders/orders.service.js';
import { remindJobId } from '../../../src/modules/appointments/appointments.service.js';
import { startTestService, type TestService } from '../../helpers/service.js';

let tdb: TestDb;
let redisServer: PrivateRedis;
const services: TestService[] = [];

beforeAll(async () => {
  tdb = await createTestDb('orders_reconcile');
  redisServer = await startPrivateRedis();
});
afterAll(async () => {
  for (const s of services) await s.stop();
  await redisServer?.stop();
  await tdb?.drop();
});

const order = (timeout: number) => orderBody({ customerId: 'rc', paymentTimeoutSeconds: timeout });

describe('reconciliation after Redis lost its data', () => {
  it('cancels overdue orders and re-creates missing expiry jobs', async () => {
    // One pass when the worker starts (the next an hour later): it must repair everything.
    const env = { REDIS_URL: redisServer.url, ORDER_RECONCILE_INTERVAL_SECONDS: '3600', ORDER_RECONCILE_GRACE_SECONDS: '1' };
    const api = await startTestService(tdb.url, env, 'api');
    services.push(api);
    const http = api.api();
    const soon = await Promise.all(Array.from({ length: 20 }, () => http.post('/orders').send(order(1))));
    const later = await Promise.all(Array.from({ length: 5 }, () => http.post('/orders').send(order(3_600))));
    const admin = new Redis(redisServer.url);
    expect(await admin.dbsize()).toBeGreaterThan(0);
    await admin.flushall();
    expect(await admin.dbsize()).toBe(0);

    // Only now do workers start: nothing in Redis tells them about these orders.
    services.push(await startTestService(tdb.url, { ...env, QUEUE_PREFIX: api.prefix }, 'worker'));
    const soonIds = soon.map((r) => r.body.id as string);
    const done = await waitFor(async () => (await tdb.db.order.count({ where: { id: { in: soonIds }, status: 'CANCELLED' } })) === soonIds.length, 15_000, 100);
    expect(done).toBe(true);
    const rows = await tdb.db.order.findMany({ where: { id: { in: soonIds } } });
    for (const o of rows) expect(o.cancelReason).toBe('PAYMENT_TIMEOUT');
    const notes = await tdb.db.notification.groupBy({ by: ['orderId'], where: { orderId: { in: soonIds } }, _count: true });
    expect(notes).toHaveLength(soonIds.length);
    for (const n of notes) expect(n._count).toBe(1);

    // The not-yet-due orders are still unpaid and have their expiry jobs back.
    const queue = api.module('orders').queue;
    for (const r of later) {
      expect((await http.get(`/orders/${r.body.id}`)).body.status).toBe('UNPAID');
      const job = await queue.get(expireJobId(r.body.id));
      expect(job).toMatchObject({ state: 'pending', dueAt: Date.parse(r.body.expiresAt) });
    }
    // And the periodic pass itself was re-created in the flushed Redis.
    expect(await queue.get('orders:reconcile')).not.toBeNull();
    admin.disconnect();
  });

  it('sends overdue reminders, re-creates future reminder jobs and delivers stranded notifications', async () => {
    const env = {
      REDIS_URL: redisServer.url,
      APPOINTMENT_RECONCILE_INTERVAL_SECONDS: '3600',
      APPOINTMENT_RECONCILE_GRACE_SECONDS: '1',
      // Appointments started when the pass runs are no candidates (the default leaves five minutes).
      APPOINTMENT_RECONCILE_AFTER_START_SECONDS: '0',
      NOTIFY_RELAY_INTERVAL_SECONDS: '1',
      ORDER_RECONCILE_INTERVAL_SECONDS: '3600',
    };
    for (const s of services.splice(0)) await s.stop(); // nothing of the first case keeps running
    const api = await startTestService(tdb.url, env, 'api');
    services.push(api);
    const http = api.api();
    const book = (inMs: number, lead: number) =>
      http.post('/appointments').send({
        customerId: 'rc',
        contact: 'rc@example.com',
        channel: 'email',
        startsAt: new Date(Date.now() + inMs).toISOString(),
        remindBeforeSeconds: lead,
      });
    const overdue = await Promise.all(Array.from({ length: 10 }, () => book(60_500, 60)));
    // Started by the time the pass runs: no candidate.
    const started = await book(1_200, 60);
    expect(started.status).toBe(201);
    // Within the pass's horizon (two intervals): their jobs are set again.
    const future = await Promise.all(Array.from({ length: 3 }, () => book(3_660_000, 60)));
    // A notification row committed whose delivery job never reached Redis.
    const stranded = await tdb.db.notification.create({
      data: { id: crypto.randomUUID(), kind: 'ORDER_CANCELLED', dedupeKey: `test-stranded-${Date.now()}`, payload: {} },
    });
    const admin = new Redis(redisServer.url);
    await admin.flushall();
    await new Promise((r) => setTimeout(r, 2_000)); // the overdue reminders are now more than the grace late

    services.push(await startTestService(tdb.url, { ...env, QUEUE_PREFIX: api.prefix }, 'worker'));
    const overdueIds = overdue.map((r) => r.body.id as string);
    const sent = await waitFor(
      async () => (await tdb.db.notification.count({ where: { appointmentId: { in: overdueIds }, status: 'SENT' } })) === overdueIds.length,
      15_000,
      100,
    );
    expect(sent).toBe(true);
    expect(await tdb.db.notification.count({ where: { appointmentId: started.body.id as string } })).toBe(0);
    const apptQueue = api.module('appointments').queue;
    for (const r of future) {
      expect(await apptQueue.get(remindJobId(r.body.id))).toMatchObject({ state: 'pending', dueAt: Date.parse(r.body.remindAt) });
    }
    expect(await waitFor(async () => (await tdb.db.notification.findUnique({ where: { id: stranded.id } }))?.status === 'SENT', 15_000, 100)).toBe(true);
    admin.disconnect();
  });
});
