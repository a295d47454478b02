// Appointments through HTTP with leads of a second or two: reminders come at
// the right time for the right slot, none for cancelled ones, one per slot.
import type { Test } from 'supertest';
import type { RedisClient } from '../../../src/core/redis.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { redisClient, sleep, waitFor } from '../../helpers/redis.js';
import { appointmentBody } from '../../helpers/bodies.js';
import { REMIND_JOB, remindJobId, remindPayload } from '../../../src/modules/appointments/appointments.service.js';
import { startTestService, stopTestService, type TestService } from '../../helpers/service.js';

let tdb: TestDb;
let svc: TestService;
let redis: RedisClient;

beforeAll(async () => {
  tdb = await createTestDb('appts_api');
  svc = await startTestService(tdb.url, { APPOINTMENT_RECONCILE_INTERVAL_SECONDS: '3600', NOTIFY_RELAY_INTERVAL_SECONDS: '3600' });
  redis = redisClient('appts-api-test');
});
afterAll(async () => {
  redis.disconnect();
  await stopTestService(svc, tdb);
});

const api = () => svc.api();
const inMs = (ms: number) => new Date(Date.now() + ms).toISOString();
const book = (startsInMs: number, lead: number, extra: Record<string, unknown> = {}) =>
  api()
    .post('/appointments')
    .send(appointmentBody({ customerId: 'pat-1', contact: '+8613800000000', channel: 'sms', startsAt: inMs(startsInMs), remindBeforeSeconds: lead, ...extra }));
const reminders = (id: string) => tdb.db.notification.findMany({ where: { appointmentId: id }, orderBy: { createdAt: 'asc' } });

describe('appointment reminders', () => {
  it('books with a reminder at startsAt - lead and sends it once, on time, for that slot', async () => {
    const res = await book(61_500, 60);
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ status: 'BOOKED', channel: 'sms', remindBeforeSeconds: 60, contact: '+8613800000000' });
    const { id, startsAt, remindAt } = res.body as { id: string; startsAt: string; remindAt: string };
    expect(Date.parse(startsAt) - Date.parse(remindAt)).toBe(60_000);
    // The payload names the slot only, the job id the appointment.
    expect(await svc.module('appointments').queue.get(remindJobId(id))).toEqual(
      expect.objectContaining({ state: 'pending', payload: { startsAt: Date.parse(startsAt) } }),
    );
    expect(await waitFor(async () => (await reminders(id)).length === 1, 5_000, 20)).toBe(true);
    const [n] = await reminders(id);
    expect(n!.createdAt.getTime()).toBeGreaterThanOrEqual(Date.parse(remindAt));
    expect(n!.createdAt.getTime() - Date.parse(remindAt)).toBeLessThan(1_000);
    expect(n).toMatchObject({ kind: 'APPOINTMENT_REMINDER', channel: 'SMS', recipient: '+8613800000000' });
    expect((n!.payload as { startsAt: string }).startsAt).toBe(startsAt);
    expect(await waitFor(async () => (await reminders(id))[0]?.status === 'SENT', 3_000, 20)).toBe(true);
    await sleep(300);
    expect(await reminders(id)).toHaveLength(1);
    const got = await api().get(`/appointments/${id}`);
    expect(got.body.reminders).toMatchObject([{ startsAt, status: 'SENT', attempts: 1 }]);
    expect(got.body.reminders[0].sentAt).not.toBeNull();
  });

  it('reminds at once when the lead reaches into the past', async () => {
    const res = await book(2_000, 3_600);
    const { id, createdAt, remindAt } = res.body;
    expect(remindAt).toBe(createdAt);
    expect(await waitFor(async () => (await reminders(id)).length === 1, 3_000, 20)).toBe(true);
  });

  it('moves the reminder with the slot and sends none for the old slot', async () => {
    const res = await book(61_200, 60); // reminder due in 1.2 s
    const id = res.body.id as string;
    const moved = await api()
      .patch(`/appointments/${id}`)
      .send({ startsAt: inMs(62_500) }); // now due in 2.5 s
    expect(moved.status).toBe(200);
    await sleep(1_600); // past the old remind time
    expect(await reminders(id)).toHaveLength(0);
    expect(await waitFor(async () => (await reminders(id)).length === 1, 3_000, 20)).toBe(true);
    const [n] = await reminders(id);
    expect((n!.payload as { startsAt: string }).startsAt).toBe(moved.body.startsAt);
    expect(n!.createdAt.getTime()).toBeGreaterThanOrEqual(Date.parse(moved.body.remindAt));
  });

  it('schedules a reminder for the new slot when moved after the first was sent, one per slot', async () => {
    const res = await book(60_300, 60);
    const id = res.body.id as string;
    expect(await waitFor(async () => (await reminders(id)).length === 1, 3_000, 20)).toBe(true);
    // Same slot, new lead: still one reminder for that slot.
    await api().patch(`/appointments/${id}`).send({ remindBeforeSeconds: 30 });
    await sleep(400);
    expect(await reminders(id)).toHaveLength(1);
    // New slot: a second reminder.
    const moved = await api()
      .patch(`/appointments/${id}`)
      .send({ startsAt: inMs(60_300), remindBeforeSeconds: 60 });
    expect(await waitFor(async () => (await reminders(id)).length === 2, 3_000, 20)).toBe(true);
    const slots = (await reminders(id)).map((n) => (n.payload as { startsAt: string }).startsAt);
    expect(slots).toEqual([res.body.startsAt, moved.body.startsAt]);
  });

  it('sends nothing for a cancelled appointment; cancelling twice is fine; a cancelled one cannot move', async () => {
    const res = await book(60_800, 60);
    const id = res.body.id as string;
    const c1 = await api().post(`/appointments/${id}/cancel`);
    expect(c1.status).toBe(200);
    expect(c1.body).toMatchObject({ status: 'CANCELLED' });
    expect(c1.body.cancelledAt).not.toBeNull();
    const c2 = await api().post(`/appointments/${id}/cancel`);
    expect(c2.status).toBe(200);
    expect(c2.body).toEqual(c1.body);
    const patch = await api()
      .patch(`/appointments/${id}`)
      .send({ startsAt: inMs(120_000) });
    expect(patch.status).toBe(409);
    expect(patch.body.code).toBe('APPOINTMENT_CANCELLED');
    expect(await svc.module('appointments').queue.get(remindJobId(id))).toBeNull();
    await sleep(1_200);
    expect(await reminders(id)).toHaveLength(0);
  });

  it('defers a reminder job that fires before the remind time to that time, not into a tight loop', async () => {
    const res = await book(120_000, 60); // remind in 60 s
    const id = res.body.id as string;
    const queue = svc.module('appointments').queue;
    await queue.reschedule(remindJobId(id), { delayMs: 0 }); // a stale job, due now
    expect(
      await waitFor(
        async () => {
          const j = await queue.get(remindJobId(id));
          // Released with the wait the database measured (remind time - its now()): due at the remind time,
          // later by the time from that statement to the release (a few ms; more on a busy machine: 5 ms
          // failed once with the cluster suite beside other work), never earlier. 60 s away: not a tight loop.
          const late = (j?.dueAt ?? 0) - Date.parse(res.body.remindAt);
          return j?.state === 'pending' && late >= -5 && late <= 2_000 && j.attempts === 0;
        },
        10_000,
        20,
      ),
    ).toBe(true);
    expect(await reminders(id)).toHaveLength(0);
  });

  it('reminds through a job whose payload names the appointment too (as QUEUE_RECORD_GROUPS=0 writes it, for workers of earlier builds)', async () => {
    const res = await book(120_000, 60);
    const { id, startsAt } = res.body as { id: string; startsAt: string };
    await tdb.db.appointment.update({ where: { id }, data: { remindAt: new Date(Date.now() - 1_000) } });
    await svc.module('appointments').queue.schedule({
      id: remindJobId(id),
      type: REMIND_JOB,
      delayMs: 0,
      payload: remindPayload({ startsAt: new Date(startsAt) }),
      mode: 'upsert',
    });
    expect(await waitFor(async () => (await reminders(id)).length === 1, 3_000, 20)).toBe(true);
    expect(((await reminders(id))[0]!.payload as { startsAt: string }).startsAt).toBe(startsAt);
  });

  it('honours Idempotency-Key on booking', async () => {
    const key = `appt-${Date.now()}`;
    const startsAt = inMs(3_600_000);
    const body = appointmentBody({ customerId: 'pat-2', contact: 'pat@example.com', startsAt, remindBeforeSeconds: undefined });
    const a = await api().post('/appointments').set('Idempotency-Key', key).send(body);
    const b = await api().post('/appointments').set('Idempotency-Key', key).send(body);
    expect(a.status).toBe(201);
    expect(b.body).toEqual(a.body);
    expect(b.headers['idempotent-replayed']).toBe('true');
    expect(a.body.remindBeforeSeconds).toBe(86_400); // the default lead
    const c = await api()
      .post('/appointments')
      .set('Idempotency-Key', key)
      .send({ ...body, contact: 'other@example.com' });
    expect(c.status).toBe(422);
    expect(c.body.code).toBe('IDEMPOTENCY_KEY_REUSED');
    expect(await tdb.db.appointment.count({ where: { idempotencyKey: { endsWith: `/${key}` } } })).toBe(1);
  });

  it('books concurrent requests through shared statements: each its own appointment and reminder job, two under one key one appointment', async () => {
    const key = `appt-together-${Date.now()}`;
    const startsAt = inMs(3_600_000);
    const body = (i: number) => appointmentBody({ customerId: 'pat-4', contact: `pat4-${i}@example.com`, startsAt, remindBeforeSeconds: 60 });
    const sent = [
      ...Array.from({ length: 10 }, (_, i) => api().post('/appointments').send(body(i))),
      api().post('/appointments').set('Idempotency-Key', key).send(body(99)),
      api().post('/appointments').set('Idempotency-Key', key).send(body(99)),
    ];
    const res = await Promise.all(sent);
    expect(res.map((r) => r.status)).toEqual(res.map(() => 201));
    const keyed = res.slice(10);
    expect(keyed[1]!.body.id).toBe(keyed[0]!.body.id);
    expect(keyed.filter((r) => r.headers['idempotent-replayed'] === 'true')).toHaveLength(1);
    expect(new Set(res.map((r) => r.body.id as string)).size).toBe(11);
    expect(await tdb.db.appointment.count({ where: { customerId: 'pat-4' } })).toBe(11);
    const queue = svc.module('appointments').queue;
    for (const r of res)
      expect(await queue.get(remindJobId(r.body.id as string)), r.body.id).toMatchObject({ state: 'pending', dueAt: Date.parse(r.body.remindAt) });
  });

  // Found by the model-based suite: a retry that came after the start was refused as "in the past".
  it('answers a replayed booking as it was, even once its start has passed', async () => {
    const key = `appt-late-${Date.now()}`;
    const body = appointmentBody({ customerId: 'pat-3', contact: 'pat@example.com', startsAt: inMs(600) });
    const a = await api().post('/appointments').set('Idempotency-Key', key).send(body);
    expect(a.status).toBe(201);
    await sleep(800);
    const b = await api().post('/appointments').set('Idempotency-Key', key).send(body);
    expect(b.status).toBe(201);
    expect(b.body.id).toBe(a.body.id);
    expect(b.headers['idempotent-replayed']).toBe('true');
    const fresh = await api().post('/appointments').set('Idempotency-Key', `${key}-new`).send(body);
    expect(fresh.status).toBe(422);
    expect(fresh.body.code).toBe('STARTS_AT_IN_PAST');
  });
});

describe('bad input: 4xx problem+json, nothing written', () => {
  const ok = () => ({ customerId: 'c', contact: 'c@example.com', channel: 'email', startsAt: inMs(3_600_000) });
  const cases: [string, () => Test, number, string][] = [
    ['no body', () => api().post('/appointments'), 400, 'VALIDATION_FAILED'],
    [
      'unknown channel',
      () =>
        api()
          .post('/appointments')
          .send({ ...ok(), channel: 'fax' }),
      400,
      'VALIDATION_FAILED',
    ],
    [
      'contact too short',
      () =>
        api()
          .post('/appointments')
          .send({ ...ok(), contact: 'ab' }),
      400,
      'VALIDATION_FAILED',
    ],
    [
      'contact too long',
      () =>
        api()
          .post('/appointments')
          .send({ ...ok(), contact: 'x'.repeat(255) }),
      400,
      'VALIDATION_FAILED',
    ],
    [
      'NUL in a contact',
      () =>
        api()
          .post('/appointments')
          .send({ ...ok(), contact: 'ab\u0000c@x.com' }),
      400,
      'VALIDATION_FAILED',
    ],
    [
      'startsAt not a date',
      () =>
        api()
          .post('/appointments')
          .send({ ...ok(), startsAt: 'tomorrow' }),
      400,
      'VALIDATION_FAILED',
    ],
    [
      'startsAt without offset',
      () =>
        api()
          .post('/appointments')
          .send({ ...ok(), startsAt: '2030-01-01T10:00:00' }),
      400,
      'VALIDATION_FAILED',
    ],
    [
      'startsAt in the past',
      () =>
        api()
          .post('/appointments')
          .send({ ...ok(), startsAt: '2001-01-01T10:00:00Z' }),
      422,
      'STARTS_AT_IN_PAST',
    ],
    [
      'start in the year 9999',
      () =>
        api()
          .post('/appointments')
          .send({ ...ok(), startsAt: '9999-12-31T10:00:00Z' }),
      422,
      'STARTS_AT_TOO_FAR',
    ],
    [
      'negative lead',
      () =>
        api()
          .post('/appointments')
          .send({ ...ok(), remindBeforeSeconds: -1 }),
      400,
      'VALIDATION_FAILED',
    ],
    [
      'lead above 30 days',
      () =>
        api()
          .post('/appointments')
          .send({ ...ok(), remindBeforeSeconds: 2_592_001 }),
      400,
      'VALIDATION_FAILED',
    ],
    [
      'unknown field',
      () =>
        api()
          .post('/appointments')
          .send({ ...ok(), room: 4 }),
      400,
      'VALIDATION_FAILED',
    ],
    ['id not a UUID', () => api().get('/appointments/nope'), 400, 'INVALID_APPOINTMENT_ID'],
    ['unknown id', () => api().get('/appointments/00000000-0000-4000-8000-000000000000'), 404, 'APPOINTMENT_NOT_FOUND'],
    ['empty PATCH', () => api().patch('/appointments/00000000-0000-4000-8000-000000000000').send({}), 400, 'VALIDATION_FAILED'],
    [
      'PATCH into the past',
      () => api().patch('/appointments/00000000-0000-4000-8000-000000000000').send({ startsAt: '2001-01-01T00:00:00Z' }),
      422,
      'STARTS_AT_IN_PAST',
    ],
    [
      'PATCH to the year 9999',
      () => api().patch('/appointments/00000000-0000-4000-8000-000000000000').send({ startsAt: '9999-12-31T00:00:00Z' }),
      422,
      'STARTS_AT_TOO_FAR',
    ],
    [
      'PATCH unknown id',
      () => api().patch('/appointments/00000000-0000-4000-8000-000000000000').send({ remindBeforeSeconds: 5 }),
      404,
      'APPOINTMENT_NOT_FOUND',
    ],
    ['notifications without a filter', () => api().get('/notifications'), 400, 'INVALID_NOTIFICATION_FILTER'],
    [
      'notifications with two filters',
      () => api().get('/notifications?orderId=00000000-0000-4000-8000-000000000000&appointmentId=00000000-0000-4000-8000-000000000000'),
      400,
      'INVALID_NOTIFICATION_FILTER',
    ],
    ['notifications with a bad id', () => api().get('/notifications?appointmentId=x'), 400, 'INVALID_NOTIFICATION_FILTER'],
  ];

  it.each(cases)('%s', async (_label, send, status, code) => {
    const before = await tdb.db.appointment.count();
    const res = await send();
    expect(res.status).toBe(status);
    expect(res.headers['content-type']).toMatch(/application\/problem\+json/);
    expect(res.body).toMatchObject({ status, code });
    expect(await tdb.db.appointment.count()).toBe(before);
  });
});
