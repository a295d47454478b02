// Shutdown stops every module's worker at once (review 2026-11-23, F9): while
// one module's handler runs out its grace period, no other module goes on
// claiming and starting jobs, and the whole stop takes one grace period,
// not one per module.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { gate } from '../../helpers/queues.js';
import { sleep, waitFor } from '../../helpers/redis.js';
import { orderBody } from '../../helpers/bodies.js';
import { startTestService, stopTestService, type TestService } from '../../helpers/service.js';

let tdb: TestDb;
let svc: TestService | undefined;
const GRACE_MS = 1_500;

beforeAll(async () => {
  tdb = await createTestDb('shutdown');
});
afterAll(async () => {
  await stopTestService(svc, tdb);
});

async function lockWaiters(): Promise<number> {
  const [r] = await tdb.db.$queryRawUnsafe<{ n: number }[]>(
    `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
  );
  return r?.n ?? 0;
}

describe('graceful shutdown', () => {
  it('stops claiming in every module at once, within one grace period', async () => {
    svc = await startTestService(tdb.url, { SHUTDOWN_GRACE_MS: String(GRACE_MS), WORKER_IDLE_RECHECK_MS: '200' });
    const s = svc;
    // A reminder handler that runs long: it waits for its appointment's row lock, held here.
    const booked = await s
      .api()
      .post('/appointments')
      // Reminded 1 s from now: time to take the lock first.
      .send({
        customerId: 'sd',
        contact: 'sd@example.com',
        channel: 'email',
        startsAt: new Date(Date.now() + 3_601_000).toISOString(),
        remindBeforeSeconds: 3_600,
      });
    expect(booked.status).toBe(201);
    const locked = gate();
    const release = gate();
    const holder = tdb.db.$transaction(
      async (tx) => {
        await tx.$queryRawUnsafe(`SELECT id FROM appointments WHERE id = $1::uuid FOR UPDATE`, booked.body.id);
        locked.open();
        await release.promise;
      },
      { timeout: 60_000 },
    );
    await locked.promise;
    // (Once the booking's reminder job is due, its handler waits for the lock.)
    expect(await waitFor(async () => (await lockWaiters()) > 0, 5_000, 20)).toBe(true);

    // An order whose expiry falls due while the service is stopping.
    const order = await s
      .api()
      .post('/orders')
      .send(orderBody({ customerId: 'sd', paymentTimeoutSeconds: 1 }));
    expect(order.status).toBe(201);
    const dueIn = Date.parse(order.body.expiresAt) - Date.now();

    const t0 = Date.now();
    const stopping = s.stop();
    // The lock is let go once every worker has had its grace period and abort
    // settle; the database pool can only close after the waiting query ends.
    const letGo = sleep(GRACE_MS + 1_500).then(() => release.open());
    await stopping;
    const stopMs = Date.now() - t0;
    await letGo;
    await holder;
    svc = undefined;

    // The orders worker stopped claiming with the others: the expiry that fell
    // due during the appointments worker's grace period was not run.
    expect(dueIn).toBeLessThan(GRACE_MS);
    expect((await tdb.db.order.findUniqueOrThrow({ where: { id: order.body.id } })).status).toBe('UNPAID');
    // One grace period and the abort settle (and here the lock held past them),
    // with a margin for a slow machine: not one grace period per module.
    expect(stopMs).toBeLessThan(GRACE_MS + 1_500 + 2_500);
    // Clean up the service's keys (stopTestService does it for a running one).
    await stopTestService({ ...s, stop: async () => {} });
  });
});
