// A worker host whose clock is off from Redis's and the database's (review
// 2026-11-23, F13): times a handler hands back to the queue are on the clock
// that decides them, not this host's. Here this process's Date.now() runs 5 s
// ahead of both; before the fix a not-yet-due expiry came back 5 s late and a
// periodic job ran a period plus 5 s apart.
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { periodicHandler } from '../../../src/queue/periodic/periodic.js';
import { silentLogger } from '../../../src/queue/types.js';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { type Harness, harness } from '../../helpers/queues.js';
import { redisNowMs, waitFor } from '../../helpers/redis.js';
import { orderBody } from '../../helpers/bodies.js';
import { expireJobId } from '../../../src/modules/orders/orders.service.js';
import { startTestService, stopTestService, type TestService } from '../../helpers/service.js';

const AHEAD_MS = 5_000;
let tdb: TestDb;
let svc: TestService;
let h: Harness | undefined;

beforeAll(async () => {
  tdb = await createTestDb('clock_skew');
  svc = await startTestService(tdb.url, { WORKER_IDLE_RECHECK_MS: '200' });
  const real = Date.now.bind(Date);
  vi.spyOn(Date, 'now').mockImplementation(() => real() + AHEAD_MS);
});
afterAll(async () => {
  vi.restoreAllMocks();
  await h?.close();
  await stopTestService(svc, tdb);
});

describe('a worker whose clock runs ahead', () => {
  it('brings a not-yet-due expiry back when the database says it is due', async () => {
    const created = await svc
      .api()
      .post('/orders')
      .send(orderBody({ customerId: 'skew', paymentTimeoutSeconds: 2 }));
    expect(created.status).toBe(201);
    // The expiry job runs now, before the deadline (as after a clock step on Redis's host).
    const orders = svc.module('orders');
    expect((await orders.queue.reschedule(expireJobId(created.body.id), { delayMs: 0 })).status).toBe('updated');
    const cancelled = await waitFor(async () => (await tdb.db.order.findUniqueOrThrow({ where: { id: created.body.id } })).status === 'CANCELLED', 15_000, 20);
    expect(cancelled).toBe(true);
    const o = await tdb.db.order.findUniqueOrThrow({ where: { id: created.body.id } });
    // Never before its deadline (the job ran some 2 s early), and on time by
    // the database clock (a few ms in the normal case; the margin is for a busy machine).
    expect(o.cancelledAt!.getTime()).toBeGreaterThanOrEqual(o.expiresAt.getTime());
    expect(o.cancelledAt!.getTime() - o.expiresAt.getTime()).toBeLessThan(1_500);
  });

  it('runs an every-N-ms periodic job N ms apart on the Redis clock', async () => {
    h = harness('skew', { tick: { maxAttempts: 1_000 } });
    const runs: number[] = [];
    const job = { id: 'skew:tick', type: 'tick', schedule: { everyMs: 300 }, run: async () => void runs.push(await redisNowMs(h!.redis)) };
    await h.queue.schedule({ id: job.id, type: job.type, at: await redisNowMs(h.redis), payload: {} });
    await h.startWorker({ tick: periodicHandler(job, silentLogger) }, { idleRecheckMs: 200 });
    // Six periods; before the fix the second run came 5.3 s after the first.
    expect(await waitFor(() => runs.length >= 3, 6 * 300 + 2_000, 20)).toBe(true);
    expect(runs[1]! - runs[0]!).toBeLessThan(300 + 1_000);
  });
});
