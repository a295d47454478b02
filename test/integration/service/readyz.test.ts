// Readiness through a Redis outage: the whole service (API and workers) runs on
// a private redis-server; the test kills it mid-test, /readyz turns 503 naming
// redis while /healthz stays up, and after a restart on the same port both
// readiness and the API come back by themselves.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { waitFor } from '../../helpers/redis.js';
import { type PrivateRedis, startPrivateRedis } from '../../helpers/redis-server.js';
import { orderBody } from '../../helpers/bodies.js';
import { expireJobId } from '../../../src/modules/orders/orders.service.js';
import { startTestService, type TestService } from '../../helpers/service.js';

let srv: PrivateRedis;
let tdb: TestDb;
let svc: TestService;

beforeAll(async () => {
  srv = await startPrivateRedis();
  tdb = await createTestDb('readyz');
  svc = await startTestService(tdb.url, { REDIS_URL: srv.url });
});
afterAll(async () => {
  if (srv && !srv.running()) await srv.restart(); // a clean stop talks to Redis
  await svc?.stop();
  await srv?.stop();
  await tdb?.drop();
});

describe('/readyz', () => {
  it('is 200, then 503 naming redis while it is down, then 200 again once it is back', async () => {
    const before = await svc.api().get('/readyz');
    expect(before.status).toBe(200);
    expect(before.body).toEqual({ status: 'ready' });

    await srv.kill();
    expect(srv.running()).toBe(false);
    const down = await svc.api().get('/readyz');
    expect(down.status).toBe(503);
    expect(down.headers['content-type']).toMatch(/^application\/problem\+json/);
    // PostgreSQL still answers: only redis is named.
    expect(down.body).toMatchObject({ status: 503, code: 'NOT_READY', detail: 'redis' });
    expect((await svc.api().get('/healthz')).status).toBe(200);

    const port = srv.port;
    await srv.restart();
    expect(srv.port).toBe(port);
    let last = 0;
    const back = await waitFor(
      async () => {
        last = (await svc.api().get('/readyz')).status;
        return last === 200;
      },
      20_000,
      200,
    );
    expect(back, `last /readyz status ${last}`).toBe(true);

    // Not only the probe: the API schedules into the restarted (empty) Redis again.
    const order = await svc
      .api()
      .post('/orders')
      .send(orderBody({ customerId: 'readyz' }));
    expect(order.status).toBe(201);
    const orders = svc.module('orders').queue;
    expect(await orders.get(expireJobId(order.body.id))).toMatchObject({ state: 'pending' });
  });
});
