// The daily report: a cron job that sums up the previous local day of the
// domains, for all clients and per client, idempotent per day, readable
// through the admin API (one client's figures with ?client=).
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SCOPES } from '../../../src/core/auth/scopes.js';
import { createLogger } from '../../../src/core/logger.js';
import { createReportsModule, dayBefore } from '../../../src/modules/reports/reports.module.js';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { redisClient, waitFor } from '../../helpers/redis.js';
import { orderBody } from '../../helpers/bodies.js';
import { bearer, makeApiKey, startTestService, stopTestService, type TestService } from '../../helpers/service.js';

const TOKEN = 'reports-admin-token-0123456789abcd';
let tdb: TestDb;
let svc: TestService;

type Part = Record<string, number | null>;
type ClientFigures = { orders: Part; parcels: Part } & Record<string, Part>;
type Figures = { orders: { created: number }; parcels: { received: number }; clients: Record<string, ClientFigures> };
type ReportsModule = { generate(day: string, tz: string): Promise<{ day: string; figures: Record<string, Record<string, number | null>> }> };

beforeAll(async () => {
  tdb = await createTestDb('reports');
  // Every second, in Shanghai time: the job's runs make the report of the day before Shanghai's today.
  svc = await startTestService(tdb.url, { ADMIN_TOKEN: TOKEN, DAILY_REPORT_CRON: '* * * * * *', DAILY_REPORT_TIMEZONE: 'Asia/Shanghai' });
});
afterAll(() => stopTestService(svc, tdb));

const admin = (path: string) => svc.api().get(path).set('Authorization', `Bearer ${TOKEN}`);

describe('daily report', () => {
  it('names the local day before the occurrence', () => {
    // 02:00 in Shanghai on 23 November is 18:00 UTC on the 22nd: the report is of the 22nd there.
    expect(dayBefore(Date.parse('2026-11-22T18:00:00Z'), 'Asia/Shanghai')).toBe('2026-11-22');
    expect(dayBefore(Date.parse('2026-11-22T18:00:00Z'), 'UTC')).toBe('2026-11-21');
    expect(dayBefore(Date.parse('2026-03-01T02:00:00Z'), 'UTC')).toBe('2026-02-28');
  });

  it('stops a worker start on a time zone PostgreSQL does not know', async () => {
    // The config refuses zones Node does not know; this is for a database whose
    // zone list is shorter than Node's (no such zone exists here, so the module
    // is built with one directly).
    const redis = redisClient('reports-tz');
    const m = createReportsModule({
      db: tdb.db,
      redis,
      config: {
        QUEUE_PREFIX: 'tz',
        QUEUE_SHARDS: 1,
        QUEUE_RECORD_GROUPS: '1',
        QUEUE_MAX_PAYLOAD_BYTES: 1_024,
        QUEUE_DEAD_RETENTION_DAYS: 7,
        QUEUE_DEAD_MAX_PER_SHARD: 100_000,
        DAILY_REPORT_CRON: '0 2 * * *',
        DAILY_REPORT_TIMEZONE: 'Mars/Olympus',
      },
      log: createLogger('silent'),
    });
    await expect(m.background![0]!.start()).rejects.toThrow(/DAILY_REPORT_TIMEZONE: PostgreSQL does not know the time zone "Mars\/Olympus"/);
    redis.disconnect();
  });

  it('runs on its cron schedule and is served by the admin API', async () => {
    const yesterday = dayBefore(Date.now(), 'Asia/Shanghai');
    expect(
      await waitFor(async () => (await admin('/admin/reports').expect(200)).body.reports.some((r: { day: string }) => r.day === yesterday), 5_000, 100),
    ).toBe(true);
    const res = await admin('/admin/reports?limit=5');
    expect(res.body.reports[0]).toMatchObject({ day: yesterday, timezone: 'Asia/Shanghai', figures: { orders: { created: 0 } } });
    // Runs of the same day replace each other: one row per day and zone.
    expect(await tdb.db.dailyReport.count()).toBe(1);
    expect((await admin('/admin/reports?limit=0')).status).toBe(400);
  });

  it('counts one local day of orders, reminders and parcels', async () => {
    const http = svc.api();
    const body = orderBody({ items: [{ sku: 's', quantity: 2, unitPriceCents: 150 }] });
    const paid = (await http.post('/orders').send(body)).body.id;
    expect((await http.post(`/orders/${paid}/pay`).send({})).status).toBe(200);
    const cancelled = (await http.post('/orders').send(body)).body.id;
    expect((await http.post(`/orders/${cancelled}/cancel`)).status).toBe(200);
    await http.post('/orders').send(body);
    await http.put('/areas/R1').send({ vehiclePlate: 'B-1', sorterContact: 'sorters@example.com' });
    for (let i = 0; i < 3; i++) await http.post('/parcels').send({ trackingNo: `rp-${i}`, area: 'R1' });

    const today = new Intl.DateTimeFormat('en-CA', { timeZone: 'Asia/Shanghai' }).format(Date.now());
    const reports = svc.module('reports') as unknown as ReportsModule;
    const r = await reports.generate(today, 'Asia/Shanghai');
    expect(r.day).toBe(today);
    expect(r.figures.orders).toMatchObject({ created: 3, paid: 1, paidCents: 300, cancelledCustomer: 1, cancelledTimeout: 0 });
    expect(r.figures.parcels).toMatchObject({ received: 3, batched: 0 });
    // The same day in another zone is another window: none of these fall on
    // the day before yesterday.
    const old = await reports.generate(dayBefore(Date.now() - 86_400_000, 'Asia/Shanghai'), 'Asia/Shanghai');
    expect(old.figures.orders).toMatchObject({ created: 0, paid: 0 });
  });

  it("counts each client's day apart, and the admin API shows one client's figures with ?client=", async () => {
    const today = new Intl.DateTimeFormat('en-CA', { timeZone: 'Asia/Shanghai' }).format(Date.now());
    const reports = svc.module('reports') as unknown as ReportsModule;
    const before = (await reports.generate(today, 'Asia/Shanghai')).figures as unknown as Figures;
    const other = request(svc.url);
    const key = bearer((await makeApiKey(tdb.url, SCOPES, 'other shop', 'other-shop')).key);
    const body = orderBody({ items: [{ sku: 's', quantity: 1, unitPriceCents: 500 }] });
    const made = (await other.post('/orders').set(key).send(body)).body.id;
    expect((await other.post(`/orders/${made}/pay`).set(key).send({})).status).toBe(200);
    await other.post('/orders').set(key).send(body);
    await other.put('/areas/R1').set(key).send({ vehiclePlate: 'O-1', sorterContact: 'other@example.com' });
    await other.post('/parcels').set(key).send({ trackingNo: 'rp-0', area: 'R1' });

    const after = (await reports.generate(today, 'Asia/Shanghai')).figures as unknown as Figures;
    expect(after.clients['other-shop']?.orders).toMatchObject({ created: 2, paid: 1, paidCents: 500 });
    expect(after.clients['other-shop']?.parcels).toMatchObject({ received: 1 });
    expect(after.clients.default).toEqual(before.clients.default);
    expect(after.orders.created).toBe(before.orders.created + 2);
    expect(after.parcels.received).toBe(before.parcels.received + 1);

    const all = (await admin('/admin/reports?limit=5').expect(200)).body.reports.find((r: { day: string }) => r.day === today);
    expect(all.figures.orders.created).toBe(after.orders.created);
    expect(all.figures.clients).toBeUndefined();
    const one = (await admin('/admin/reports?limit=5&client=other-shop').expect(200)).body.reports.find((r: { day: string }) => r.day === today);
    expect(one.figures).toEqual(after.clients['other-shop']);
    const none = (await admin('/admin/reports?limit=5&client=no-such-shop').expect(200)).body.reports.find((r: { day: string }) => r.day === today);
    expect(none.figures.orders).toEqual({ created: 0, paid: 0, paidCents: 0, cancelledTimeout: 0, cancelledCustomer: 0 });
    expect((await admin('/admin/reports?client=not%20a%20client')).status).toBe(400);
  });

  it('counts a send on its day however long before the notification was written', async () => {
    // A reminder written weeks ago and sent today (its slot moved away and back, say).
    await tdb.db.$executeRawUnsafe(
      `INSERT INTO notifications (id, kind, dedupe_key, status, attempts, created_at, sent_at)
       VALUES (gen_random_uuid(), 'APPOINTMENT_REMINDER', 'old-reminder', 'SENT', 1, now() - interval '40 days', now())`,
    );
    const today = new Intl.DateTimeFormat('en-CA', { timeZone: 'Asia/Shanghai' }).format(Date.now());
    const r = await (svc.module('reports') as unknown as ReportsModule).generate(today, 'Asia/Shanghai');
    expect(r.figures.reminders).toMatchObject({ written: 0, sent: 1, failed: 0 });
  });
});
