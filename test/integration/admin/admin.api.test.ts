// The operators' admin API through HTTP against real Redis: token auth, queue
// stats, dead-letter pagination, redrive, delete, run-now and cancel.
import type { RedisClient } from '../../../src/core/redis.js';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Queue } from '../../../src/queue/producer/queue.js';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { parseExposition, valueOf } from '../../helpers/prometheus.js';
import { redisClient, sleep, waitFor } from '../../helpers/redis.js';
import { startTestService, stopTestService, type TestService } from '../../helpers/service.js';

const TOKEN = 'test-admin-token-0123456789abcdefgh';
let tdb: TestDb;
let svc: TestService;
let redis: RedisClient;
let orders: Queue;

beforeAll(async () => {
  tdb = await createTestDb('admin');
  svc = await startTestService(tdb.url, { ADMIN_TOKEN: TOKEN, ORDER_RECONCILE_INTERVAL_SECONDS: '3600' });
  orders = svc.module('orders').queue;
  redis = redisClient('admin-test');
});
afterAll(async () => {
  redis.disconnect();
  await stopTestService(svc, tdb);
});

const admin = () => ({
  get: (p: string) => svc.api().get(p).set('Authorization', `Bearer ${TOKEN}`),
  post: (p: string) => svc.api().post(p).set('Authorization', `Bearer ${TOKEN}`),
  del: (p: string) => svc.api().delete(p).set('Authorization', `Bearer ${TOKEN}`),
});

/** Jobs that die at once: the expiry handler refuses a job whose id names no order. */
async function deadJobs(n: number, tag: string): Promise<string[]> {
  const ids = Array.from({ length: n }, (_, i) => `order:${tag}-${i}:expire`);
  await orders.scheduleMany(ids.map((id) => ({ id, type: 'order.expire', delayMs: 0, payload: { orderId: 'not-a-uuid' } })));
  expect(await waitFor(async () => (await Promise.all(ids.map((id) => orders.get(id)))).every((j) => j?.state === 'dead'), 5_000, 20)).toBe(true);
  return ids;
}

describe('admin API', () => {
  it('refuses requests without the right token, in constant form', async () => {
    for (const auth of [undefined, 'Bearer wrong-token', `Basic ${TOKEN}`, `Bearer ${TOKEN}x`]) {
      const req = svc.api().get('/admin/queues');
      const res = await (auth ? req.set('Authorization', auth) : req);
      expect(res.status).toBe(401);
      expect(res.body.code).toBe('UNAUTHORIZED');
      expect(res.headers['www-authenticate']).toBe('Bearer');
    }
    expect((await admin().get('/admin/queues')).status).toBe(200);
    // The scheme name is case-insensitive, the token is not.
    expect((await svc.api().get('/admin/queues').set('Authorization', `bearer ${TOKEN}`)).status).toBe(200);
    expect((await svc.api().get('/admin/queues').set('Authorization', `Bearer ${TOKEN.toUpperCase()}`)).status).toBe(401);
  });

  it('reports every queue with its shards: pending, due now, in flight, dead, next due, lag', async () => {
    await orders.schedule({
      id: 'order:stats-later:expire',
      type: 'order.expire',
      delayMs: 3_600_000,
      payload: { orderId: '00000000-0000-4000-8000-000000000001' },
    });
    const res = await admin().get('/admin/queues');
    const names = res.body.queues.map((q: { total: { queue: string } }) => q.total.queue).sort();
    expect(names).toEqual(['appointments', 'notifications', 'orders', 'parcels', 'reports', 'timers']);
    const o = res.body.queues.find((q: { total: { queue: string } }) => q.total.queue === 'orders');
    expect(o.total).toMatchObject({
      shard: 'all',
      pending: expect.any(Number),
      dueNow: expect.any(Number),
      inFlight: expect.any(Number),
      dead: expect.any(Number),
      oldestDueLagMs: expect.any(Number),
    });
    expect(o.total.pending).toBeGreaterThanOrEqual(1);
    expect(o.shards).toHaveLength(orders.shards);
    expect(o.shards.reduce((sum: number, sh: { pending: number }) => sum + sh.pending, 0)).toBe(o.total.pending);
  });

  it('pages through dead jobs, redrives and deletes them', async () => {
    const ids = await deadJobs(5, 'dead');
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const res = await admin().get(`/admin/queues/orders/dead?limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      expect(res.status).toBe(200);
      for (const j of res.body.jobs) {
        expect(j.state).toBe('dead');
        expect(j.lastError).toMatch(/names no order/);
        seen.push(j.id);
      }
      cursor = res.body.next;
      pages++;
    } while (cursor && pages < 10);
    expect(seen.filter((id) => ids.includes(id)).sort()).toEqual([...ids].sort());
    expect(new Set(seen).size).toBe(seen.length); // no job on two pages

    const before = (await admin().get(`/admin/queues/orders/jobs/${encodeURIComponent(ids[0]!)}`)).body;
    expect(before).toMatchObject({ state: 'dead', type: 'order.expire' });
    expect((await admin().post(`/admin/queues/orders/dead/${encodeURIComponent(ids[0]!)}/redrive`)).status).toBe(200);
    // It runs again (and dies again: the payload is still bad): a later death.
    expect(
      await waitFor(
        async () => {
          const j = await orders.get(ids[0]!);
          return j?.state === 'dead' && Date.parse(before.diedAt) < (j.diedAt ?? 0);
        },
        3_000,
        20,
      ),
    ).toBe(true);

    expect((await admin().del(`/admin/queues/orders/dead/${encodeURIComponent(ids[1]!)}`)).status).toBe(200);
    expect(await orders.get(ids[1]!)).toBeNull();
    expect((await admin().del(`/admin/queues/orders/dead/${encodeURIComponent(ids[1]!)}`)).status).toBe(404);

    const all = await admin().post('/admin/queues/orders/dead/redrive?max=100');
    expect(all.status).toBe(200);
    expect(all.body.redriven).toBeGreaterThanOrEqual(3);
  });

  it('runs a pending job now and cancels one', async () => {
    const id = 'order:00000000-0000-4000-8000-000000000002:expire';
    await orders.schedule({ id, type: 'order.expire', delayMs: 3_600_000, payload: { orderId: '00000000-0000-4000-8000-000000000002' } });
    const run = await admin().post(`/admin/queues/orders/jobs/${encodeURIComponent(id)}/run-now`);
    expect(run.status).toBe(200);
    // No such order: the handler settles it at once and the job is gone.
    expect(await waitFor(async () => (await orders.get(id)) === null, 3_000, 20)).toBe(true);

    const other = 'order:00000000-0000-4000-8000-000000000003:expire';
    await orders.schedule({ id: other, type: 'order.expire', delayMs: 3_600_000, payload: { orderId: '00000000-0000-4000-8000-000000000003' } });
    const del = await admin().del(`/admin/queues/orders/jobs/${encodeURIComponent(other)}`);
    expect(del.body).toEqual({ status: 'cancelled', was: 'pending' });
    expect(await orders.get(other)).toBeNull();
  });

  it('answers bad input with 4xx problems', async () => {
    expect((await admin().get('/admin/queues/nope/dead')).body.code).toBe('QUEUE_NOT_FOUND');
    expect((await admin().get('/admin/queues/orders/jobs/missing')).status).toBe(404);
    const bad = await admin().get(`/admin/queues/orders/jobs/${encodeURIComponent('a\nb')}`);
    expect(bad.status).toBe(400);
    expect(bad.body.code).toBe('INVALID_JOB_ID');
    expect((await admin().get('/admin/queues/orders/dead?limit=0')).status).toBe(400);
    expect((await admin().get('/admin/queues/orders/dead?cursor=garbage')).status).toBe(400);
    expect((await admin().post('/admin/queues/orders/jobs/none/run-now')).status).toBe(404);
  });
});

describe('admin API without a token configured', () => {
  it('is not there at all', async () => {
    const other = await startTestService(tdb.url, {}, 'api');
    try {
      const res = await request(other.url).get('/admin/queues').set('Authorization', `Bearer ${TOKEN}`);
      expect(res.status).toBe(404);
    } finally {
      await other.stop();
    }
  });
});

describe('metrics', () => {
  const scrape = async () => {
    const res = await svc.api().get('/metrics');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/plain; version=0\.0\.4/);
    return parseExposition(res.text); // throws on any line that is not valid exposition format
  };

  it('serves Prometheus text whose counters move as jobs run', async () => {
    const before = await scrape();
    await deadJobs(2, 'metrics');
    const ok = 'order:00000000-0000-4000-8000-000000000009:expire';
    await orders.schedule({ id: ok, type: 'order.expire', delayMs: 0, payload: { orderId: '00000000-0000-4000-8000-000000000009' } });
    expect(await waitFor(async () => (await orders.get(ok)) === null, 3_000, 20)).toBe(true);
    await svc.api().get('/orders/00000000-0000-4000-8000-000000000009');
    await sleep(1_100); // a scrape within a second of the one before gets its cached text
    const after = await scrape();

    const q = { queue: 'orders' };
    const moved = (name: string, labels: Record<string, string> = q) => valueOf(after, name, labels) - valueOf(before, name, labels);
    expect(moved('ots_jobs_scheduled_total')).toBeGreaterThanOrEqual(3);
    expect(moved('ots_jobs_claimed_total')).toBeGreaterThanOrEqual(3);
    expect(moved('ots_jobs_dead_lettered_total')).toBe(2);
    expect(moved('ots_jobs_completed_total')).toBeGreaterThanOrEqual(1);
    expect(moved('ots_job_lateness_seconds_count')).toBeGreaterThanOrEqual(3);
    expect(moved('ots_job_duration_seconds_count', { queue: 'orders', type: 'order.expire' })).toBeGreaterThanOrEqual(1);
    expect(moved('ots_http_request_duration_seconds_count', { method: 'GET', route: '/orders/:id', status: '404' })).toBe(1);
    for (const [name, type] of [
      ['ots_jobs_scheduled_total', 'counter'],
      ['ots_job_lateness_seconds', 'histogram'],
      ['ots_queue_jobs', 'gauge'],
    ]) {
      expect(after.get(name as string)?.type, name).toBe(type);
    }
    // The depth gauge is read from Redis at scrape time: it agrees with the admin API
    // (once jobs redriven by the test before have settled).
    let seen = '';
    const agree = await waitFor(
      async () => {
        const stats = (await admin().get('/admin/queues')).body.queues.find((x: { total: { queue: string } }) => x.total.queue === 'orders').total;
        const gauge = valueOf(await scrape(), 'ots_queue_jobs', { queue: 'orders', state: 'dead' });
        seen = `api ${stats.dead}, gauge ${gauge}`;
        return gauge === stats.dead && gauge >= 2;
      },
      5_000,
      100,
    );
    expect(agree, seen).toBe(true);
  });

  it('tags every HTTP answer with a request id', async () => {
    const res = await svc.api().get('/healthz').set('X-Request-Id', 'abc-123');
    expect(res.headers['x-request-id']).toBe('abc-123');
    const fresh = await svc.api().get('/healthz').set('X-Request-Id', 'bad id with spaces');
    expect(fresh.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
  });
});
