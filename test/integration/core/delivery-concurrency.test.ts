// The notifications and timers workers run DELIVERY_CONCURRENCY deliveries at
// once, not WORKER_CONCURRENCY: a delivery is one outbound call and mostly
// waits on its receiver. Here the receiver holds every call unanswered, so the
// calls it has received are the deliveries running at once.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NotificationDispatch } from '../../../src/core/delivery/index.js';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { waitFor } from '../../helpers/redis.js';
import { startTestService, stopTestService, type TestService } from '../../helpers/service.js';
import { startWebhook, type Webhook } from '../../helpers/webhook.js';

const DELIVERIES = 12;

let tdb: TestDb;
let svc: TestService;
let hook: Webhook;
beforeAll(async () => {
  tdb = await createTestDb('delivery_concurrency');
  hook = await startWebhook(() => 'hang');
  svc = await startTestService(tdb.url, {
    NOTIFY_WEBHOOK_URL: hook.url,
    WORKER_CONCURRENCY: '1',
    DELIVERY_CONCURRENCY: String(DELIVERIES),
    // No call times out while the test looks; shutdown does not wait for them.
    NOTIFY_TIMEOUT_MS: '15000',
    SHUTDOWN_GRACE_MS: '0',
    NOTIFY_RELAY_INTERVAL_SECONDS: '3600',
    TIMER_WEBHOOK_HOSTS: `127.0.0.1:${new URL(hook.url).port}`,
    TIMER_RELAY_INTERVAL_SECONDS: '3600',
  });
}, 60_000);
afterAll(async () => {
  await stopTestService(svc, tdb);
  await hook?.close();
});

const notifications = () => svc.module('notifications') as unknown as { dispatch: NotificationDispatch };

/** The calls of notifications (their body has a kind) and of timers (a key). */
const notificationCalls = () => hook.calls.filter((c) => c.body.kind !== undefined);
const timerCalls = () => hook.calls.filter((c) => (c.body as unknown as { key?: string }).key !== undefined);

describe('delivery concurrency', () => {
  it('runs DELIVERY_CONCURRENCY notification calls at once, whatever WORKER_CONCURRENCY says', async () => {
    const ids = Array.from({ length: DELIVERIES }, () => randomUUID());
    await tdb.db.notification.createMany({ data: ids.map((id) => ({ id, kind: 'ORDER_CANCELLED' as const, dedupeKey: `conc:${id}`, payload: {} })) });
    await notifications().dispatch(ids);
    // At WORKER_CONCURRENCY the receiver would hold one call until its 15 s timeout.
    expect(await waitFor(() => notificationCalls().length >= DELIVERIES, 10_000)).toBe(true);
    expect(new Set(notificationCalls().map((c) => c.body.id)).size).toBe(DELIVERIES);
    expect(hook.delivered).toHaveLength(0);
  });

  it('runs DELIVERY_CONCURRENCY timer calls at once, whatever WORKER_CONCURRENCY says', async () => {
    const target = { type: 'webhook', url: `${hook.url}/timers` };
    for (let i = 0; i < DELIVERIES; i++) expect((await svc.api().put(`/timers/c${i}`).send({ delayMs: 0, target })).status).toBe(201);
    expect(await waitFor(() => timerCalls().length >= DELIVERIES, 10_000)).toBe(true);
    expect(new Set(timerCalls().map((c) => (c.body as unknown as { key: string }).key)).size).toBe(DELIVERIES);
    expect(hook.delivered).toHaveLength(0);
  });
});
