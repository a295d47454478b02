// Third-party delivery through a webhook (a real local HTTP server): retries
// with the configured spacing, FAILED and dead-lettered after the last attempt,
// redriven once the receiver recovers, a hanging receiver timed out, never sent
// twice once SENT.
import { redriveOne } from '../../../src/modules/admin/redrive.js';
import type { RedisClient } from '../../../src/core/redis.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { redisClient, sleep, waitFor } from '../../helpers/redis.js';
import { startTestService, stopTestService, type TestService } from '../../helpers/service.js';
import { deliverJobId } from '../../../src/modules/notifications/notifications.jobs.js';
import { startWebhook, type Webhook } from '../../helpers/webhook.js';

let tdb: TestDb;
let svc: TestService;
let hook: Webhook;
let redis: RedisClient;
const DELAYS = [150, 300, 450];

beforeAll(async () => {
  tdb = await createTestDb('webhook');
  hook = await startWebhook();
  svc = await startTestService(tdb.url, {
    NOTIFY_WEBHOOK_URL: hook.url,
    NOTIFY_RETRY_DELAYS_MS: DELAYS.join(','),
    NOTIFY_RETRY_JITTER: '0',
    NOTIFY_MAX_ATTEMPTS: '4',
    NOTIFY_TIMEOUT_MS: '300',
    NOTIFY_RELAY_INTERVAL_SECONDS: '3600',
    APPOINTMENT_RECONCILE_INTERVAL_SECONDS: '3600',
  });
  redis = redisClient('webhook-test');
});
afterAll(async () => {
  await hook?.close();
  redis.disconnect();
  await stopTestService(svc, tdb);
});

const notificationsQueue = () => svc.module('notifications').queue;

/** Books an appointment whose reminder is due at once; returns its notification once written. */
async function remindNow(tag: string) {
  const res = await svc
    .api()
    .post('/appointments')
    .send({
      customerId: tag,
      contact: `${tag}@example.com`,
      channel: 'email',
      startsAt: new Date(Date.now() + 60_000).toISOString(),
      remindBeforeSeconds: 3_600,
    });
  expect(res.status).toBe(201);
  let id = '';
  await waitFor(
    async () => {
      const n = await tdb.db.notification.findFirst({ where: { appointmentId: res.body.id } });
      id = n?.id ?? '';
      return id !== '';
    },
    3_000,
    10,
  );
  return id;
}

const callsFor = (id: string) => hook.calls.filter((c) => c.body.id === id);
const row = (id: string) => tdb.db.notification.findUniqueOrThrow({ where: { id } });

describe('webhook delivery', () => {
  it('retries a failing receiver with the configured spacing until it succeeds', async () => {
    let failuresLeft = 3;
    hook.setBehaviour(() => (failuresLeft-- > 0 ? 'fail' : 'ok'));
    const id = await remindNow('flaky');
    expect(await waitFor(async () => (await row(id)).status === 'SENT', 5_000, 20)).toBe(true);
    const calls = callsFor(id);
    expect(calls).toHaveLength(4);
    const gaps = calls.slice(1).map((c, i) => c.at - calls[i]!.at);
    gaps.forEach((g, i) => {
      expect(g).toBeGreaterThanOrEqual(DELAYS[i]! - 5);
      expect(g).toBeLessThan(DELAYS[i]! + 400);
    });
    for (const c of calls) expect(c.idempotencyKey).toBe(id);
    expect(await row(id)).toMatchObject({ attempts: 4, lastError: null });
    await sleep(300);
    expect(callsFor(id)).toHaveLength(4); // SENT: never again
  });

  it('marks an always-failing delivery FAILED in the dead set, and a redrive delivers it once the receiver recovers', async () => {
    hook.setBehaviour(() => 'fail');
    const id = await remindNow('down');
    const jobId = deliverJobId(id);
    expect(await waitFor(async () => (await notificationsQueue().get(jobId))?.state === 'dead', 5_000, 20)).toBe(true);
    expect(await row(id)).toMatchObject({ status: 'FAILED', attempts: 4, lastError: 'webhook failed: HTTP 503' });
    expect(callsFor(id)).toHaveLength(4);
    const listed = await svc.api().get(`/notifications?appointmentId=${(await row(id)).appointmentId}`);
    expect(listed.body.notifications).toMatchObject([{ id, status: 'FAILED', attempts: 4, lastError: 'HTTP 503' }]); // a category; the row keeps the text

    hook.setBehaviour(() => 'ok');
    expect(await redriveOne(notificationsQueue(), svc.module('notifications').redrives, jobId)).toBe(true);
    expect(await waitFor(async () => (await row(id)).status === 'SENT', 3_000, 20)).toBe(true);
    expect(callsFor(id)).toHaveLength(5);
    expect(await notificationsQueue().get(jobId)).toBeNull();
    // A second redrive of nothing changes nothing.
    expect(await redriveOne(notificationsQueue(), svc.module('notifications').redrives, jobId)).toBe(false);
  });

  it('times out a hanging receiver and retries', async () => {
    let hung = false;
    hook.setBehaviour(() => {
      if (hung) return 'ok';
      hung = true;
      return 'hang';
    });
    const id = await remindNow('hang');
    expect(await waitFor(async () => (await row(id)).status === 'SENT', 5_000, 20)).toBe(true);
    const calls = callsFor(id);
    expect(calls).toHaveLength(2);
    // The 300 ms timeout runs from when the client starts the request, which is
    // before the receiver logs it (by tens of ms on a loaded machine), so the
    // gap seen here can be a little shorter than timeout + retry delay.
    expect(calls[1]!.at - calls[0]!.at).toBeGreaterThanOrEqual(300 + DELAYS[0]! - 50);
    expect((await row(id)).attempts).toBe(2);
  });

  it('does not retry a delivery the receiver refuses as malformed', async () => {
    hook.setBehaviour(() => 'reject');
    const id = await remindNow('reject');
    expect(await waitFor(async () => (await row(id)).status === 'FAILED', 3_000, 20)).toBe(true);
    expect(callsFor(id)).toHaveLength(1);
    expect((await row(id)).lastError).toMatch(/HTTP 400/);
  });

  it('withdraws an undelivered reminder when its appointment is cancelled, and never sends it', async () => {
    hook.setBehaviour(() => 'fail');
    const id = await remindNow('withdrawn');
    expect(await waitFor(() => callsFor(id).length >= 1, 3_000, 10)).toBe(true);
    const appointmentId = (await row(id)).appointmentId!;
    const c = await svc.api().post(`/appointments/${appointmentId}/cancel`);
    expect(c.status).toBe(200);
    expect(await row(id)).toMatchObject({ status: 'CANCELLED', lastError: 'appointment cancelled before the reminder was delivered' });
    hook.setBehaviour(() => 'ok');
    const callsThen = callsFor(id).length;
    await sleep(DELAYS.reduce((a, b) => a + b, 0) + 300); // past every retry it had left
    expect(callsFor(id)).toHaveLength(callsThen);
    expect((await row(id)).status).toBe('CANCELLED');
  });
});
