// A notification the receiver refused is called again only after an
// operator's redrive, recorded in PostgreSQL before the job moves: two ways a
// delivery comes back by itself as a first attempt due later than the refused
// call, which a rule read from Redis (attempts, due times) took for a redrive
// (adversarial review, 2026-11-25):
// - Redis loses the claim while the refused call runs; the delivery claimed
//   again finds the row SENDING and is handed back with its attempt refunded;
// - a reminder is taken back (its slot left and held again) while its refused
//   call runs: no fault at all, the take-back replaces the job.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { redriveOne } from '../../src/modules/admin/redrive.js';
import { DELIVER_JOB, deliverJobId, scheduleDeliveries } from '../../src/modules/notifications/notifications.jobs.js';
import { appointmentBody } from '../helpers/bodies.js';
import { createTestDb, type TestDb } from '../helpers/db.js';
import { waitFor } from '../helpers/redis.js';
import { startTestService, stopTestService, type TestService } from '../helpers/service.js';
import { startWebhook, type Webhook } from '../helpers/webhook.js';

const LEASE_MS = 6_000;
const TIMEOUT_MS = 2_500;
/** How long the refused call takes: the window in which the delivery comes back. */
const SLOW_MS = 1_500;
const slot = (minutes: number) => new Date(Math.ceil(Date.now() / 60_000) * 60_000 + minutes * 60_000).toISOString();

let tdb: TestDb;
let svc: TestService;
let hook: Webhook;
beforeAll(async () => {
  tdb = await createTestDb('notify_redrive');
  hook = await startWebhook();
  svc = await startTestService(tdb.url, {
    NOTIFY_WEBHOOK_URL: hook.url,
    NOTIFY_RETRY_DELAYS_MS: '200',
    NOTIFY_RETRY_JITTER: '0',
    NOTIFY_MAX_ATTEMPTS: '5',
    NOTIFY_TIMEOUT_MS: String(TIMEOUT_MS),
    WORKER_LEASE_MS: String(LEASE_MS),
    WORKER_IDLE_RECHECK_MS: '200',
    NOTIFY_RELAY_INTERVAL_SECONDS: '3600',
    APPOINTMENT_RECONCILE_INTERVAL_SECONDS: '3600',
  });
}, 60_000);
afterAll(async () => {
  await stopTestService(svc, tdb);
  await hook?.close();
});

const notifications = () => svc.module('notifications');
const calls = (id: string) => hook.calls.filter((c) => c.body.id === id);
const row = (id: string) => tdb.db.notification.findUniqueOrThrow({ where: { id } });
const deadOrGone = async (id: string) => ['dead', undefined].includes((await notifications().queue.get(deliverJobId(id)))?.state);

/** After the refusal: FAILED, its job dead, the receiver called once; an operator's redrive then calls it once more. */
async function refusedOnceThenRedriven(id: string): Promise<void> {
  expect(await waitFor(async () => (await row(id)).status === 'FAILED' && (await deadOrGone(id)), 15_000, 50)).toBe(true);
  // Long enough for any delivery that came back to have called (the busy hand-back waits out the call's timeout and margin).
  await new Promise((r) => setTimeout(r, TIMEOUT_MS + 2_000));
  expect(calls(id).map((c) => c.answer)).toEqual(['reject']);
  expect(await row(id)).toMatchObject({ status: 'FAILED', redriveRequested: false });
  expect(await redriveOne(notifications().queue, notifications().beforeRedrive, deliverJobId(id))).toBe(true);
  expect(await waitFor(async () => (await row(id)).status === 'SENT', 10_000, 50)).toBe(true);
  expect(calls(id).map((c) => c.answer)).toEqual(['reject', 'ok']);
  expect((await row(id)).redriveRequested).toBe(false);
}

describe('a refused notification', () => {
  it('is not called again when Redis loses the claim during the refused call (the busy hand-back refunds attempt 1 to a later due time)', async () => {
    const id = randomUUID();
    await tdb.db.notification.create({ data: { id, kind: 'ORDER_CANCELLED', dedupeKey: `redrive:${id}`, payload: {} } });
    hook.setBehaviour((_, b) => (b.id === id && calls(id).length === 1 ? { slowMs: SLOW_MS, then: 'reject' } : 'ok'));
    const [s] = await scheduleDeliveries(notifications().queue, [id]);
    expect(await waitFor(() => calls(id).length === 1, 5_000, 5)).toBe(true);
    // Redis restarts without its last second: the job is as before its claim (pending, attempt 0, due when it was).
    await notifications().queue.schedule({ id: deliverJobId(id), type: DELIVER_JOB, at: s!.dueAt, payload: { notificationId: id }, mode: 'upsert' });
    await refusedOnceThenRedriven(id);
  }, 40_000);

  it('is not called again when its reminder is taken back (slot left and held again) during the refused call', async () => {
    const a = slot(120);
    const booked = await svc
      .api()
      .post('/appointments')
      .send(appointmentBody({ startsAt: a, remindBeforeSeconds: 86_400 }));
    expect(booked.status).toBe(201);
    let n = '';
    hook.setBehaviour((_, body) => {
      const startsAt = (body as unknown as { payload?: { startsAt?: string } }).payload?.startsAt;
      if (!n && startsAt === a) n = body.id;
      return body.id === n && calls(n).length === 1 ? { slowMs: SLOW_MS, then: 'reject' } : 'ok';
    });
    expect(await waitFor(() => n !== '' && calls(n).length === 1, 5_000, 5)).toBe(true);
    expect(
      (
        await svc
          .api()
          .patch(`/appointments/${booked.body.id}`)
          .send({ startsAt: slot(240) })
      ).status,
    ).toBe(200);
    expect((await svc.api().patch(`/appointments/${booked.body.id}`).send({ startsAt: a })).status).toBe(200);
    await refusedOnceThenRedriven(n);
  }, 40_000);
});
