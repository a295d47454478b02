// The admin endpoints behind the dashboard, over HTTP against the whole
// service: lateness per queue as the workers recorded it, the latest parcel
// batches across areas, their input checks, and the page itself (public, but
// only where the admin API is on).
import type { RedisClient } from '../../../src/core/redis.js';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Queue } from '../../../src/queue/producer/queue.js';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { redisClient, waitFor } from '../../helpers/redis.js';
import { startTestService, stopTestService, type TestService } from '../../helpers/service.js';

const TOKEN = 'ops-admin-token-0123456789abcdefgh';
let tdb: TestDb;
let svc: TestService;
let redis: RedisClient;
let orders: Queue;

beforeAll(async () => {
  tdb = await createTestDb('adminops');
  svc = await startTestService(tdb.url, { ADMIN_TOKEN: TOKEN, PARCEL_BATCH_SIZE: '2', ORDER_RECONCILE_INTERVAL_SECONDS: '3600' });
  orders = svc.module('orders').queue;
  redis = redisClient('adminops-test');
});
afterAll(async () => {
  redis.disconnect();
  await stopTestService(svc, tdb);
});

const get = (p: string) => svc.api().get(p).set('Authorization', `Bearer ${TOKEN}`);
type Point = { t: number; count: number; meanMs: number; maxMs: number; p50Ms: number; p95Ms: number; p99Ms: number };
type Lateness = { from: string; to: string; bucketsMs: number[]; queues: { queue: string; points: Point[] }[] };

describe('GET /admin/lateness', () => {
  it('returns what the workers recorded, per queue and second', async () => {
    const ids = Array.from({ length: 12 }, (_, i) => `order:00000000-0000-4000-8000-0000000001${String(i).padStart(2, '0')}:expire`);
    // No such orders: each handler settles at once. Due a little in the past, so each starts late.
    await orders.scheduleMany(ids.map((id) => ({ id, type: 'order.expire', at: Date.now() - 250, payload: { orderId: id.split(':')[1] } })));
    expect(await waitFor(async () => (await Promise.all(ids.map((id) => orders.get(id)))).every((j) => j === null), 5_000, 20)).toBe(true);

    let body: Lateness | undefined;
    const seen = await waitFor(
      async () => {
        body = (await get('/admin/lateness?minutes=1')).body as Lateness;
        return (body.queues.find((q) => q.queue === 'orders')?.points.reduce((a, p) => a + p.count, 0) ?? 0) >= ids.length;
      },
      5_000,
      100,
    );
    expect(seen, JSON.stringify(body)).toBe(true);
    const from = Date.parse(body!.from);
    const to = Date.parse(body!.to);
    expect(to - from).toBe(60_000);
    expect(body!.queues.map((q) => q.queue).sort()).toEqual(['appointments', 'notifications', 'orders', 'parcels', 'reports', 'timers']);
    const points = body!.queues.find((q) => q.queue === 'orders')!.points;
    expect(points.map((p) => p.t)).toEqual([...points.map((p) => p.t)].sort((a, b) => a - b));
    for (const p of points) {
      expect(p.t % 1_000).toBe(0);
      expect(p.t).toBeGreaterThanOrEqual(from - 1_000);
      expect(p.t).toBeLessThanOrEqual(to);
      expect(p.count).toBeGreaterThan(0);
      expect(p.p50Ms).toBeLessThanOrEqual(p.p95Ms);
      expect(p.p95Ms).toBeLessThanOrEqual(p.p99Ms);
      expect(p.p99Ms).toBeLessThanOrEqual(p.maxMs);
    }
    // Due 250 ms before they were scheduled: every one of them started at least that late.
    expect(Math.max(...points.map((p) => p.maxMs))).toBeGreaterThanOrEqual(240);
  });

  it('refuses a bad window and a missing token', async () => {
    for (const q of ['minutes=0', 'minutes=16', 'minutes=abc', 'minutes=1.5', 'minutes=2&queue=orders']) {
      const res = await get(`/admin/lateness?${q}`);
      expect(res.status, q).toBe(400);
      expect(res.body.code, q).toBe('VALIDATION_FAILED');
    }
    expect((await svc.api().get('/admin/lateness')).status).toBe(401);
  });
});

describe('GET /admin/batches', () => {
  it('lists the latest batches of every area, newest first', async () => {
    const made: string[] = [];
    for (const area of ['OPS-A', 'OPS-B']) {
      expect(
        (
          await svc
            .api()
            .put(`/areas/${area}`)
            .send({ vehiclePlate: `V-${area}`, sorterContact: 'sorter@example.com' })
        ).status,
      ).toBe(200);
      await svc
        .api()
        .post('/parcels')
        .send({ trackingNo: `${area}-1`, area });
      const full = await svc
        .api()
        .post('/parcels')
        .send({ trackingNo: `${area}-2`, area });
      expect(full.body.status).toBe('BATCHED');
      made.push(full.body.batchId as string);
    }
    const all = await get('/admin/batches');
    expect(all.status).toBe(200);
    expect(all.body.batches.map((b: { id: string }) => b.id)).toEqual([made[1], made[0]]);
    expect(all.body.batches[0]).toMatchObject({ area: 'OPS-B', vehiclePlate: 'V-OPS-B', reason: 'FULL', parcels: 2 });
    expect((await get('/admin/batches?limit=1')).body.batches.map((b: { id: string }) => b.id)).toEqual([made[1]]);
    for (const q of ['limit=0', 'limit=101', 'limit=x', 'area=OPS-A']) expect((await get(`/admin/batches?${q}`)).status, q).toBe(400);
  });
});

describe('the dashboard page', () => {
  it('is served without the token, with its script and style', async () => {
    const page = await svc.api().get('/admin/dashboard');
    expect(page.status).toBe(200);
    expect(page.headers['content-type']).toMatch(/text\/html/);
    expect(page.headers['content-security-policy']).toMatch(/default-src 'self'.*frame-ancestors 'none'/);
    for (const [file, type] of [
      ['dashboard.js', /javascript/],
      ['chart.js', /javascript/],
      ['dashboard.css', /text\/css/],
    ] as const) {
      const res = await svc.api().get(`/admin/dashboard/${file}`);
      expect(res.status, file).toBe(200);
      expect(res.headers['content-type'], file).toMatch(type);
    }
    // Only these files: the page's route knows no others.
    for (const other of ['secret.js', 'index.html', '..%2F..%2Fadmin.routes.ts']) {
      const res = await svc.api().get(`/admin/dashboard/${other}`);
      expect(res.status, other).toBe(404);
      expect(res.body.code, other).toBe('NOT_FOUND');
    }
  });

  it('is not there when the admin API is off', async () => {
    const other = await startTestService(tdb.url, {}, 'api');
    try {
      expect((await request(other.url).get('/admin/dashboard')).status).toBe(404);
    } finally {
      await other.stop();
    }
  });
});
