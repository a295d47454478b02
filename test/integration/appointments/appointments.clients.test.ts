// Appointments and their reminders belong to the client (tenant) that booked
// them: another client's key finds none of them (404 as an unknown id, an
// empty notification list) and can neither move nor cancel them, while each
// client's own reminders are delivered and recorded as its own, and its
// idempotency keys are its own.
import { randomUUID } from 'node:crypto';
import request, { type Agent } from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SCOPES } from '../../../src/core/auth/scopes.js';
import { remindJobId } from '../../../src/modules/appointments/appointments.service.js';
import { deliverJobId } from '../../../src/modules/notifications/notifications.jobs.js';
import { appointmentBody } from '../../helpers/bodies.js';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { waitFor } from '../../helpers/redis.js';
import { bearer, makeApiKey, startTestService, stopTestService, type TestService } from '../../helpers/service.js';
import { startWebhook, type Webhook } from '../../helpers/webhook.js';

let tdb: TestDb;
let svc: TestService;
let hook: Webhook;
let keyA: string;
let keyB: string;

beforeAll(async () => {
  tdb = await createTestDb('appts_clients');
  hook = await startWebhook(() => 'fail');
  svc = await startTestService(tdb.url, {
    NOTIFY_WEBHOOK_URL: hook.url,
    // A failed call is retried a minute later: A's first reminder stays PENDING through the test.
    NOTIFY_RETRY_DELAYS_MS: '60000',
    NOTIFY_RETRY_JITTER: '0',
    NOTIFY_MAX_ATTEMPTS: '3',
    NOTIFY_RELAY_INTERVAL_SECONDS: '3600',
    APPOINTMENT_RECONCILE_INTERVAL_SECONDS: '3600',
  });
  // Both clients named, so a row recording the column's default would not pass for either.
  keyA = (await makeApiKey(tdb.url, SCOPES, 'a', 'client-a')).key;
  keyB = (await makeApiKey(tdb.url, SCOPES, 'b', 'client-b')).key;
});
afterAll(async () => {
  await stopTestService(svc, tdb);
  await hook?.close();
});

const as = (key: string) => request.agent(svc.url).set(bearer(key));
const a = () => as(keyA);
const b = () => as(keyB);
/** Starts in two hours, reminded a day ahead: the reminder is written at once. */
const bookAs = (key: string, customerId: string) =>
  as(key)
    .post('/appointments')
    .send(
      appointmentBody({
        customerId,
        contact: `${customerId}@example.com`,
        channel: 'email',
        startsAt: new Date(Date.now() + 2 * 3_600_000).toISOString(),
        remindBeforeSeconds: 86_400,
      }),
    );
const remindersOf = (appointmentId: string) => tdb.db.notification.findMany({ where: { appointmentId }, orderBy: { createdAt: 'asc' } });
/** A problem body with its id spelled X, to compare the answer for one id with the answer for another. */
const withoutId = (body: unknown, id: string) => JSON.parse(JSON.stringify(body).replaceAll(id, 'X')) as unknown;

describe("another client's appointment", () => {
  let id: string;
  let booked: Record<string, unknown>;
  let reminderId: string;
  /** What must not change: A's appointment as A reads it, its reminder row, its queue jobs. */
  const snapshot = async () => ({
    appointment: (await a().get(`/appointments/${id}`)).body as unknown,
    reminder: await tdb.db.notification.findUniqueOrThrow({ where: { id: reminderId } }),
    remindJob: await svc.module('appointments').queue.get(remindJobId(id)),
    deliverJob: await svc.module('notifications').queue.get(deliverJobId(reminderId)),
  });
  let before: Awaited<ReturnType<typeof snapshot>>;

  beforeAll(async () => {
    const res = await bookAs(keyA, 'ann');
    expect(res.status).toBe(201);
    booked = res.body as Record<string, unknown>;
    id = booked.id as string;
    // A's reminder written, its first call failed, its retry a minute away: PENDING and still.
    expect(
      await waitFor(
        async () => {
          const [n] = await remindersOf(id);
          reminderId = n?.id ?? '';
          const job = n && (await svc.module('notifications').queue.get(deliverJobId(n.id)));
          return n?.status === 'PENDING' && n.attempts === 1 && job?.state === 'pending';
        },
        10_000,
        20,
      ),
    ).toBe(true);
    hook.setBehaviour(() => 'ok');
    before = await snapshot();
    expect(before.appointment).toMatchObject({ status: 'BOOKED', reminders: [{ id: reminderId, status: 'PENDING' }] });
  });

  it('is 404 APPOINTMENT_NOT_FOUND to B, as an unknown id is', async () => {
    const unknown = randomUUID();
    const [other, none] = await Promise.all([b().get(`/appointments/${id}`), b().get(`/appointments/${unknown}`)]);
    expect(other.status).toBe(404);
    expect(other.body.code).toBe('APPOINTMENT_NOT_FOUND');
    expect(withoutId(other.body, id)).toEqual(withoutId(none.body, unknown));
    expect(other.body.contact).toBeUndefined();
  });

  it('cannot be moved by B: 404 as an unknown id, its slot, reminder and jobs as they were', async () => {
    const unknown = randomUUID();
    const to = { startsAt: new Date(Date.now() + 3 * 3_600_000).toISOString() };
    const [other, none] = await Promise.all([b().patch(`/appointments/${id}`).send(to), b().patch(`/appointments/${unknown}`).send(to)]);
    expect(other.status).toBe(404);
    expect(other.body.code).toBe('APPOINTMENT_NOT_FOUND');
    expect(withoutId(other.body, id)).toEqual(withoutId(none.body, unknown));
    expect(await snapshot()).toEqual(before);
    expect((await a().get(`/appointments/${id}`)).body.startsAt).toBe(booked.startsAt);
  });

  it('cannot be cancelled by B: 404 as an unknown id, still BOOKED with its reminder PENDING', async () => {
    const unknown = randomUUID();
    const [other, none] = await Promise.all([b().post(`/appointments/${id}/cancel`), b().post(`/appointments/${unknown}/cancel`)]);
    expect(other.status).toBe(404);
    expect(other.body.code).toBe('APPOINTMENT_NOT_FOUND');
    expect(withoutId(other.body, id)).toEqual(withoutId(none.body, unknown));
    const after = await snapshot();
    expect(after).toEqual(before);
    expect(after.appointment).toMatchObject({ status: 'BOOKED', cancelledAt: null });
    expect(after.reminder).toMatchObject({ status: 'PENDING', withdrawnAt: null });
  });

  it('has no notifications for B, as an unknown id has none; A sees its reminder', async () => {
    const [other, none, own] = await Promise.all([
      b().get('/notifications').query({ appointmentId: id }),
      b().get('/notifications').query({ appointmentId: randomUUID() }),
      a().get('/notifications').query({ appointmentId: id }),
    ]);
    expect(other.status).toBe(200);
    expect(other.body).toEqual({ notifications: [] });
    expect(other.body).toEqual(none.body);
    expect(own.body.notifications).toMatchObject([{ id: reminderId, kind: 'APPOINTMENT_REMINDER', status: 'PENDING', appointmentId: id }]);
  });
});

describe("each client's reminders", () => {
  it('are delivered, each notification row recording its client', async () => {
    const [ra, rb] = await Promise.all([bookAs(keyA, 'amy'), bookAs(keyB, 'bob')]);
    expect([ra.status, rb.status]).toEqual([201, 201]);
    const ids = { 'client-a': ra.body.id as string, 'client-b': rb.body.id as string };
    for (const [client, id] of Object.entries(ids)) {
      expect(await waitFor(async () => (await remindersOf(id))[0]?.status === 'SENT', 10_000, 20)).toBe(true);
      const rows = await remindersOf(id);
      expect(rows).toHaveLength(1);
      expect(rows[0]).toMatchObject({ client, kind: 'APPOINTMENT_REMINDER', recipient: `${client === 'client-a' ? 'amy' : 'bob'}@example.com` });
      expect(hook.delivered.map((c) => c.body.id)).toContain(rows[0]!.id);
    }
    // Each sees its own reminder, not the other's.
    const seen = async (who: () => Agent, id: string) =>
      ((await who().get('/notifications').query({ appointmentId: id })).body.notifications as unknown[]).length;
    expect(await seen(a, ids['client-a'])).toBe(1);
    expect(await seen(b, ids['client-b'])).toBe(1);
    expect(await seen(a, ids['client-b'])).toBe(0);
    expect(await seen(b, ids['client-a'])).toBe(0);
    expect((await b().get(`/appointments/${ids['client-b']}`)).body.reminders).toMatchObject([{ status: 'SENT' }]);
  });

  it("do not share Idempotency-Keys: B's booking under A's key is B's own, not a replay of A's", async () => {
    const key = `clients-${randomUUID()}`;
    const body = appointmentBody({ customerId: 'same', contact: 'same@example.com', startsAt: new Date(Date.now() + 3 * 3_600_000).toISOString() });
    const ra = await a().post('/appointments').set('Idempotency-Key', key).send(body);
    const rb = await b().post('/appointments').set('Idempotency-Key', key).send(body);
    expect([ra.status, rb.status]).toEqual([201, 201]);
    expect(rb.headers['idempotent-replayed']).toBeUndefined();
    expect(rb.body.id).not.toBe(ra.body.id);
    expect((await b().get(`/appointments/${ra.body.id}`)).status).toBe(404);
  });
});
