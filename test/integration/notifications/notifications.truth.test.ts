// What the service records about a notification is what the receiver got,
// and a reminder is owed to every slot held at its remind time (review
// 2026-11-23: F1, F2, F10, F11):
// - a slot left and taken again gets its withdrawn reminder back, from the
//   job or from the reconciliation pass (F1);
// - a withdrawal while the receiver is being called cannot unsend it: the row
//   ends SENT if the call went through, CANCELLED if it failed (F2), and a
//   slot held again meanwhile leaves the row to that call (one call);
// - a delivery renews its lease before the call, so a slow start cannot let
//   another worker call the receiver a second time (F10);
// - the relay gives up on a row whose delivery job was dead-lettered before
//   it settled the row (F11).
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ServiceModule } from '../../../src/core/module.js';
import { DEFAULT_CLIENT } from '../../../src/core/auth/api-key-input.js';
import { createAppointmentsRepository } from '../../../src/modules/appointments/appointments.repository.js';
import { deliverJobId, scheduleDeliveries } from '../../../src/modules/notifications/notifications.jobs.js';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { gate } from '../../helpers/queues.js';
import { sleep, waitFor } from '../../helpers/redis.js';
import { startTestService, stopTestService, type TestService } from '../../helpers/service.js';
import { remindJobId } from '../../../src/modules/appointments/appointments.service.js';
import { startWebhook, type Webhook } from '../../helpers/webhook.js';

let tdb: TestDb;
let svc: TestService;
let hook: Webhook;
const LEASE_MS = 1_000;

beforeAll(async () => {
  tdb = await createTestDb('truth');
  hook = await startWebhook();
  svc = await startTestService(tdb.url, {
    NOTIFY_WEBHOOK_URL: hook.url,
    NOTIFY_RETRY_DELAYS_MS: '200',
    NOTIFY_RETRY_JITTER: '0',
    NOTIFY_MAX_ATTEMPTS: '50',
    NOTIFY_TIMEOUT_MS: String(LEASE_MS / 2),
    WORKER_LEASE_MS: String(LEASE_MS),
    WORKER_IDLE_RECHECK_MS: '200',
    NOTIFY_RELAY_INTERVAL_SECONDS: '3600',
    APPOINTMENT_RECONCILE_INTERVAL_SECONDS: '3600',
    APPOINTMENT_RECONCILE_GRACE_SECONDS: '0',
  });
});
afterAll(async () => {
  await stopTestService(svc, tdb);
  await hook?.close();
});

const moduleNamed = (name: string) => svc.module(name) as ServiceModule;
const row = (id: string) => tdb.db.notification.findUniqueOrThrow({ where: { id } });
const deliveredTo = (id: string) => hook.delivered.filter((c) => c.body.id === id).length;
const callsTo = (id: string) => hook.calls.filter((c) => c.body.id === id).length;

/** A slot whose remind time has come: `minutes` ahead, reminded a day before. */
const slot = (minutes: number) => new Date(Math.ceil(Date.now() / 60_000) * 60_000 + minutes * 60_000).toISOString();

async function book(tag: string, startsAt: string): Promise<string> {
  const res = await svc
    .api()
    .post('/appointments')
    .send({ customerId: tag, contact: `${tag}@example.com`, channel: 'email', startsAt, remindBeforeSeconds: 86_400 });
  expect(res.status).toBe(201);
  return res.body.id as string;
}

async function move(id: string, startsAt: string): Promise<void> {
  const res = await svc.api().patch(`/appointments/${id}`).send({ startsAt });
  expect(res.status).toBe(200);
}

/** The reminder row of one slot, once written. */
async function reminderOf(appointmentId: string, startsAt: string): Promise<string> {
  let id = '';
  const found = await waitFor(
    async () => {
      const rows = await tdb.db.notification.findMany({ where: { appointmentId, kind: 'APPOINTMENT_REMINDER' } });
      id = rows.find((n) => (n.payload as { startsAt: string }).startsAt === startsAt)?.id ?? '';
      return id !== '';
    },
    5_000,
    10,
  );
  expect(found, `reminder of ${appointmentId} for ${startsAt}`).toBe(true);
  return id;
}

describe('a slot left and held again', () => {
  it('gets its withdrawn reminder back when the appointment returns to it (the job)', async () => {
    hook.setBehaviour(() => 'fail');
    const a = slot(60);
    const b = slot(120);
    const id = await book('back', a);
    const first = await reminderOf(id, a);
    await move(id, b);
    expect((await row(first)).status).toBe('CANCELLED');
    await move(id, a);
    // The job for slot A writes the reminder again: the same row, PENDING, attempts from scratch.
    expect(await waitFor(async () => (await row(first)).status !== 'CANCELLED', 5_000, 20)).toBe(true);
    hook.setBehaviour(() => 'ok');
    expect(await waitFor(async () => (await row(first)).status === 'SENT', 5_000, 20)).toBe(true);
    expect(deliveredTo(first)).toBe(1);
    expect((await row(await reminderOf(id, b))).status).toBe('CANCELLED');
  });

  it('gets it back from the reconciliation pass when the job was lost', async () => {
    hook.setBehaviour(() => 'fail');
    const a = slot(180);
    const b = slot(240);
    const id = await book('back-reconcile', a);
    const first = await reminderOf(id, a);
    await move(id, b);
    expect(await waitFor(async () => (await row(first)).status === 'CANCELLED', 5_000, 20)).toBe(true);
    // The job wrote slot B's reminder and is done: nothing runs for this appointment now.
    await reminderOf(id, b);
    expect(await waitFor(async () => (await moduleNamed('appointments').queue.get(remindJobId(id))) === null, 5_000, 20)).toBe(true);
    // Back to A in the database only, its job lost (Redis lost it, or the
    // move's schedule never reached Redis): no job can take the reminder back.
    await moduleNamed('appointments').queue.cancel(remindJobId(id));
    await createAppointmentsRepository(tdb.db).reschedule(DEFAULT_CLIENT, id, new Date(a), null);
    hook.setBehaviour(() => 'ok');
    const appointments = moduleNamed('appointments') as ServiceModule & { reconcile: { run(h: number): Promise<{ written: number }> } };
    expect((await appointments.reconcile.run(60_000)).written).toBe(1);
    expect(await waitFor(async () => (await row(first)).status === 'SENT', 5_000, 20)).toBe(true);
    expect(deliveredTo(first)).toBe(1);
  });
});

describe('a withdrawal while the receiver is being called', () => {
  it('records SENT when the call went through: the receiver has it', async () => {
    hook.setBehaviour(() => ({ slowMs: 300, then: 'ok' }));
    const a = slot(300);
    const id = await book('cancel-during-send', a);
    const n = await reminderOf(id, a);
    expect(await waitFor(() => callsTo(n) === 1, 5_000, 5)).toBe(true);
    expect((await svc.api().post(`/appointments/${id}/cancel`)).status).toBe(200);
    expect(await waitFor(() => deliveredTo(n) === 1, 5_000, 10)).toBe(true);
    expect(await waitFor(async () => (await row(n)).status === 'SENT', 5_000, 20)).toBe(true);
  });

  it('records CANCELLED, and calls no more, when that call failed', async () => {
    hook.setBehaviour(() => ({ slowMs: 300, then: 'fail' }));
    const a = slot(360);
    const id = await book('cancel-during-failing-send', a);
    const n = await reminderOf(id, a);
    expect(await waitFor(() => callsTo(n) === 1, 5_000, 5)).toBe(true);
    expect((await svc.api().post(`/appointments/${id}/cancel`)).status).toBe(200);
    expect(await waitFor(async () => (await row(n)).status === 'CANCELLED', 5_000, 20)).toBe(true);
    hook.setBehaviour(() => 'ok');
    await sleep(800); // past its retry delay
    expect(callsTo(n)).toBe(1);
    expect(deliveredTo(n)).toBe(0);
    expect((await row(n)).status).toBe('CANCELLED');
  });

  it('leaves the call to decide when the slot is left and held again meanwhile: one call, SENT', async () => {
    hook.setBehaviour(() => ({ slowMs: 300, then: 'ok' }));
    const a = slot(420);
    const id = await book('back-during-send', a);
    const n = await reminderOf(id, a);
    expect(await waitFor(() => callsTo(n) === 1, 5_000, 5)).toBe(true);
    // Away and back while the call runs: the row stays the running call's (a
    // row withdrawn as CANCELLED would be taken back as new and called again).
    await move(id, slot(480));
    await move(id, a);
    expect(await waitFor(async () => (await row(n)).status === 'SENT', 5_000, 20)).toBe(true);
    await sleep(800); // a second delivery would have called by now
    expect(callsTo(n)).toBe(1);
    expect(deliveredTo(n)).toBe(1);
  });
});

describe('a delivery that starts late in its lease', () => {
  it('renews the lease before the call, so the receiver is called once', async () => {
    hook.setBehaviour(() => ({ slowMs: LEASE_MS / 2 - 100, then: 'ok' }));
    const id = randomUUID();
    await tdb.db.notification.create({ data: { id, kind: 'ORDER_CANCELLED', dedupeKey: `truth-lease:${id}`, payload: {} } });
    // Hold the row's lock so the delivery's claim waits most of its lease.
    const locked = gate();
    const release = gate();
    const holder = tdb.db.$transaction(async (tx) => {
      await tx.$queryRawUnsafe(`SELECT id FROM notifications WHERE id = $1::uuid FOR UPDATE`, id);
      locked.open();
      await release.promise;
    });
    await locked.promise;
    await scheduleDeliveries(moduleNamed('notifications').queue, [id]);
    await sleep(LEASE_MS - 150);
    release.open();
    await holder;
    expect(await waitFor(async () => (await row(id)).status === 'SENT', 5_000, 20)).toBe(true);
    await sleep(LEASE_MS); // a second delivery, if any, would have called by now
    expect(callsTo(id)).toBe(1);
  });
});

describe('the relay', () => {
  it('marks FAILED a row whose delivery job was dead-lettered before it settled the row', async () => {
    const id = randomUUID();
    await tdb.db.notification.create({ data: { id, kind: 'ORDER_CANCELLED', dedupeKey: `truth-relay:${id}`, payload: {} } });
    await tdb.db.$executeRawUnsafe(`UPDATE notifications SET created_at = now() - interval '1 minute' WHERE id = $1::uuid`, id);
    // Its job dies without settling the row (here: a payload its handler refuses).
    const notifications = moduleNamed('notifications');
    const jobId = deliverJobId(id);
    await notifications.queue.schedule({ id: jobId, type: 'notification.deliver', delayMs: 0, payload: { notificationId: 'not-a-uuid' } });
    expect(await waitFor(async () => (await notifications.queue.get(jobId))?.state === 'dead', 5_000, 20)).toBe(true);
    expect((await row(id)).status).toBe('PENDING');
    await notifications.periodic.find((p) => p.id === 'notifications:relay')!.run({ occurrence: Date.now(), signal: new AbortController().signal });
    expect(await row(id)).toMatchObject({ status: 'FAILED' });
    expect((await row(id)).lastError).toMatch(/dead-lettered/);
  });
});
