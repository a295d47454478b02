// The limits while the service's Redis is away (review 2026-11-26, S6, S7):
// the per-contact reminder limit, which stands in front of a paid SMS
// channel, refuses (503 REDIS_UNAVAILABLE with Retry-After) and nothing is
// written, whether Redis hangs (SIGSTOP) or is gone; the per-key limit lets
// requests through. Bound to answer within a few seconds: the limiter's call
// and the guard's each wait at most REDIS_CALL_TIMEOUT_MS.
import type { Response } from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appointmentBody, orderBody } from '../../helpers/bodies.js';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { waitFor } from '../../helpers/redis.js';
import { type PrivateRedis, startPrivateRedis } from '../../helpers/redis-server.js';
import { startTestService, stopTestService, type TestService } from '../../helpers/service.js';

let server: PrivateRedis;
let tdb: TestDb;
let svc: TestService;

beforeAll(async () => {
  server = await startPrivateRedis();
  tdb = await createTestDb('appointments_redis_down');
  svc = await startTestService(tdb.url, {
    REDIS_URL: server.url,
    REDIS_CLUSTER_NODES: '',
    QUEUE_SHARDS: '1',
    REMINDERS_PER_CONTACT_PER_HOUR: '3',
    API_SHED_EVENT_LOOP_DELAY_MS: '0',
  });
});
afterAll(async () => {
  server?.resume();
  if (server && !server.running()) await server.restart();
  await stopTestService(svc, tdb);
  await server?.stop();
});

const book = (contact: string) =>
  svc
    .api()
    .post('/appointments')
    .send(appointmentBody({ contact, channel: 'sms' }));
const booked = (contact: string) => tdb.db.appointment.count({ where: { contact } });

function refused(r: Response): void {
  expect(r.status).toBe(503);
  expect(r.headers['content-type']).toMatch(/^application\/problem\+json/);
  expect(r.body.code).toBe('REDIS_UNAVAILABLE');
  expect(Number(r.headers['retry-after'])).toBeGreaterThanOrEqual(1);
}

describe('the contact limit while Redis is away', () => {
  it('answers 503 with Retry-After and writes nothing, Redis hung or gone; the per-key limit lets requests through', async () => {
    const first = await book('+8613800000001');
    expect(first.status).toBe(201);
    const order = await svc.api().post('/orders').send(orderBody()).expect(201);

    server.pause();
    try {
      refused(await book('+8613800000002'));
      const moved = await svc
        .api()
        .patch(`/appointments/${first.body.id}`)
        .send({ startsAt: new Date(Date.now() + 7_200_000).toISOString() });
      refused(moved);
      // A route without a reminder goes on: the per-key limit admits while Redis hangs.
      await svc.api().get(`/orders/${order.body.id}`).expect(200);
    } finally {
      server.resume();
    }
    expect(await booked('+8613800000002')).toBe(0);
    expect((await tdb.db.appointment.findUniqueOrThrow({ where: { id: first.body.id } })).startsAt.toISOString()).toBe(first.body.startsAt);

    // Back: the limit counts again (the first booking was one of this contact's three).
    expect(await waitFor(async () => (await svc.api().get('/readyz')).status === 200, 15_000, 100)).toBe(true);
    expect((await book('+8613800000003')).status).toBe(201);

    await server.kill();
    // Gone: the first calls meet the closed connection, the later ones a connection not ready.
    for (let i = 0; i < 3; i++) {
      const r = await book('+8613800000004');
      refused(r);
      await svc.api().get(`/orders/${order.body.id}`).expect(200);
    }
    expect(await booked('+8613800000004')).toBe(0);
  });
});
