// Two batches creating the same new keys in opposite orders: the keys are
// inserted in one order, so neither deadlocks the other.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { startTestService, stopTestService, type TestService } from '../../helpers/service.js';

let tdb: TestDb;
let svc: TestService;
const target = { type: 'webhook', url: 'http://a.example/x' };

beforeAll(async () => {
  tdb = await createTestDb('timers_deadlock');
  svc = await startTestService(tdb.url, { TIMER_WEBHOOK_HOSTS: 'a.example', TIMER_RELAY_INTERVAL_SECONDS: '3600' });
});
afterAll(async () => stopTestService(svc, tdb));

it('two batches of the same new keys in opposite orders: both answered 200, each key once', async () => {
  const statuses: string[] = [];
  for (let round = 0; round < 5; round++) {
    const timers = Array.from({ length: 500 }, (_, i) => ({ key: `d${round}-${i}`, delayMs: 3_600_000, target }));
    const [x, y] = await Promise.all([
      svc.api().post('/timers/batch').send({ timers }),
      svc
        .api()
        .post('/timers/batch')
        .send({ timers: [...timers].reverse() }),
    ]);
    statuses.push(`${x.status}${x.status !== 200 ? ` ${x.body.code}` : ''} / ${y.status}${y.status !== 200 ? ` ${y.body.code}` : ''}`);
  }
  expect(statuses).toEqual(statuses.map(() => '200 / 200'));
});
