// The notifications worker runs DELIVERY_CONCURRENCY deliveries at once, not
// WORKER_CONCURRENCY: a delivery is one outbound call and mostly waits on its
// receiver. Here the receiver holds every call unanswered, so the calls it
// has received are the deliveries running at once.
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
  tdb = await createTestDb('notify_concurrency');
  hook = await startWebhook(() => 'hang');
  svc = await startTestService(tdb.url, {
    NOTIFY_WEBHOOK_URL: hook.url,
    WORKER_CONCURRENCY: '1',
    DELIVERY_CONCURRENCY: String(DELIVERIES),
    // No call times out while the test looks; shutdown does not wait for them.
    NOTIFY_TIMEOUT_MS: '15000',
    SHUTDOWN_GRACE_MS: '0',
    NOTIFY_RELAY_INTERVAL_SECONDS: '3600',
  });
}, 60_000);
afterAll(async () => {
  await stopTestService(svc, tdb);
  await hook?.close();
});

const notifications = () => svc.module('notifications') as unknown as { dispatch: NotificationDispatch };

describe('notification delivery concurrency', () => {
  it('runs DELIVERY_CONCURRENCY calls at once, whatever WORKER_CONCURRENCY says', async () => {
    const ids = Array.from({ length: DELIVERIES }, () => randomUUID());
    await tdb.db.notification.createMany({ data: ids.map((id) => ({ id, kind: 'ORDER_CANCELLED' as const, dedupeKey: `conc:${id}`, payload: {} })) });
    await notifications().dispatch(ids);
    // At WORKER_CONCURRENCY the receiver would hold one call until its 15 s timeout.
    expect(await waitFor(() => hook.calls.length >= DELIVERIES, 10_000)).toBe(true);
    expect(new Set(hook.calls.map((c) => c.body.id)).size).toBe(DELIVERIES);
    expect(hook.delivered).toHaveLength(0);
  });
});
