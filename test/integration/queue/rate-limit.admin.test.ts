// Run-time rate limits from the admin API: set, listed, applied by a running
// worker within about a second, removed; bad input refused with nothing
// stored; a Redis that lost them gets them back from PostgreSQL.
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createQueue, createQueueLimiter, createWorker, silentLogger } from '../../../src/queue/index.js';
import { queueLimitKeys } from '../../../src/queue/keys.js';
import { type TestDb, createTestDb } from '../../helpers/db.js';
import { redisClient, uniqueQueueName } from '../../helpers/redis.js';
import { type TestService, startTestService, stopTestService } from '../../helpers/service.js';

const TOKEN = 'rate-limits-admin-token-0123456789abcdef';
const redis = redisClient('rate-limit-admin-test');
let tdb: TestDb;
let svc: TestService;
const admin = () => request(svc.url);
const auth = { authorization: `Bearer ${TOKEN}` };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

beforeAll(async () => {
  tdb = await createTestDb('ratelimits');
  svc = await startTestService(tdb.url, { ADMIN_TOKEN: TOKEN, QUEUE_RATE_LIMITS: 'timers=1000/1s,endpoint:webhook:example.com=20/1s' });
}, 60_000);

afterAll(async () => {
  await stopTestService(svc, tdb);
  redis.disconnect();
});

const stored = async () => ({
  rows: await tdb.db.$queryRawUnsafe<{ scope: string }[]>('SELECT scope FROM queue_rate_limits'),
  redis: await redis.hgetall(queueLimitKeys(svc.prefix).rules),
});

describe('admin rate limits', () => {
  it('lists the configured rules', async () => {
    const r = await admin().get('/admin/rate-limits').set(auth).expect(200);
    expect(r.body.configured).toEqual([
      { scope: 'timers', count: 1000, intervalMs: 1000 },
      { scope: 'endpoint:webhook:example.com', count: 20, intervalMs: 1000 },
    ]);
    expect(r.body.runtime).toEqual([]);
    expect(r.body.slowed).toEqual([]);
  });

  it('refuses bad input with a 400 and stores nothing', async () => {
    const before = await stored();
    const bad: [string, unknown, string][] = [
      ['orders', { count: 0, intervalMs: 1000 }, 'VALIDATION_FAILED'],
      ['orders', { count: 5, intervalMs: 0 }, 'VALIDATION_FAILED'],
      ['orders', { count: 5, intervalMs: 1000, burst: 3 }, 'VALIDATION_FAILED'],
      ['orders', { count: 2_000_000, intervalMs: 1 }, 'VALIDATION_FAILED'],
      ['orders', { limit: '5/1s' }, 'VALIDATION_FAILED'],
      [encodeURIComponent('endpoint:{x}'), { count: 5, intervalMs: 1000 }, 'INVALID_RATE_LIMIT_SCOPE'],
      [encodeURIComponent('Orders Queue'), { count: 5, intervalMs: 1000 }, 'INVALID_RATE_LIMIT_SCOPE'],
      [encodeURIComponent('orders:bad type!'), { count: 5, intervalMs: 1000 }, 'INVALID_RATE_LIMIT_SCOPE'],
    ];
    for (const [scope, body, code] of bad) {
      const r = await admin()
        .put(`/admin/rate-limits/${scope}`)
        .set(auth)
        .send(body as object)
        .expect(400);
      expect(r.headers['content-type']).toMatch(/application\/problem\+json/);
      expect(r.body.code, `${scope} ${JSON.stringify(body)}`).toBe(code);
    }
    expect(await stored()).toEqual(before);
    await admin().delete('/admin/rate-limits/orders').set(auth).expect(404);
    await admin().put('/admin/rate-limits/orders').send({ count: 5, intervalMs: 1000 }).expect(401);
  });

  it('a run-time limit reaches a running worker within about a second, and its removal too', { timeout: 60_000 }, async () => {
    const name = uniqueQueueName('rladm');
    const limiter = createQueueLimiter({ redis, prefix: svc.prefix, log: silentLogger });
    await limiter.start();
    const queue = createQueue(redis, { name, prefix: svc.prefix, types: { t: {} } });
    const ran: number[] = [];
    const worker = createWorker({ queue, redis, limiter, concurrency: 10, handlers: { t: async () => void ran.push(Date.now()) } });
    await worker.start();
    try {
      const put = await admin().put(`/admin/rate-limits/${name}`).set(auth).send({ count: 5, intervalMs: 1000 }).expect(200);
      expect(put.body).toEqual({ scope: name, count: 5, intervalMs: 1000 });
      expect((await stored()).rows.map((r) => r.scope)).toContain(name);
      await sleep(1_500);
      const t0 = Date.now();
      await queue.scheduleMany(Array.from({ length: 40 }, (_, i) => ({ id: `j${i}`, type: 't', delayMs: 0 })));
      await sleep(3_000);
      // 5 a second (and a burst of 1): about 16 in 3 s, not 40.
      const limited = ran.filter((t) => t >= t0 && t < t0 + 3_000).length;
      expect(limited).toBeGreaterThanOrEqual(12);
      expect(limited).toBeLessThanOrEqual(19);
      const listed = await admin().get('/admin/rate-limits').set(auth).expect(200);
      expect(listed.body.runtime).toEqual([{ scope: name, count: 5, intervalMs: 1000 }]);
      expect(listed.body.effective).toContainEqual({ scope: name, count: 5, intervalMs: 1000 });

      await admin().delete(`/admin/rate-limits/${name}`).set(auth).expect(204);
      expect((await stored()).rows.map((r) => r.scope)).not.toContain(name);
      // The rest were handed back spaced at 5 a second; once the worker knows
      // the rule is gone they run as they come due, every one on its first attempt.
      const deadline = Date.now() + 15_000;
      while (ran.length < 40 && Date.now() < deadline) await sleep(100);
      expect(ran.length).toBe(40);
      expect((await queue.stats()).dead).toBe(0);
    } finally {
      await worker.stop();
      limiter.stop();
    }
  });

  it('rules Redis lost are put back from PostgreSQL', { timeout: 30_000 }, async () => {
    await admin().put('/admin/rate-limits/orders').set(auth).send({ count: 7, intervalMs: 2000 }).expect(200);
    const key = queueLimitKeys(svc.prefix).rules;
    expect(await redis.hget(key, 'orders')).toBe('7/2000ms');
    await redis.del(key);
    const deadline = Date.now() + 12_000;
    while ((await redis.hget(key, 'orders')) === null && Date.now() < deadline) await sleep(200);
    expect(await redis.hget(key, 'orders')).toBe('7/2000ms');
    await admin().delete('/admin/rate-limits/orders').set(auth).expect(204);
  });
});
