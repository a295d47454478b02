// The timers API end to end on a real service, database and Redis, with a
// local webhook receiver: each mode (replace, keep, debounce with its maximum
// wait), cancel before the fire time, the record after delivery, allowlists,
// bad input refused with nothing written, two clients apart.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { waitFor } from '../../helpers/redis.js';
import { makeApiKey, startTestService, stopTestService, type TestService } from '../../helpers/service.js';
import { startWebhook, type Webhook } from '../../helpers/webhook.js';
import request from 'supertest';

let tdb: TestDb;
let svc: TestService;
let hook: Webhook;
let target: { type: 'webhook'; url: string };

beforeAll(async () => {
  tdb = await createTestDb('timers_api');
  hook = await startWebhook();
  const port = new URL(hook.url).port;
  target = { type: 'webhook', url: `${hook.url}/timers` };
  svc = await startTestService(tdb.url, {
    TIMER_WEBHOOK_HOSTS: `127.0.0.1:${port}`,
    TIMER_WEBHOOK_RETRY_DELAYS_MS: '100',
    NOTIFY_RETRY_JITTER: '0',
    TIMER_RELAY_INTERVAL_SECONDS: '3600',
  });
});
afterAll(async () => {
  await stopTestService(svc, tdb);
  await hook?.close();
});

const callsOf = (key: string) => hook.delivered.filter((c) => (c.body as unknown as { key: string }).key === key);

describe('timers', () => {
  it('replace: creates (201), moves while pending (200), fires once at the moved time with the last payload', async () => {
    const first = await svc
      .api()
      .put('/timers/r1')
      .send({ delayMs: 60_000, target, payload: { n: 1 } });
    expect(first.status).toBe(201);
    expect(first.body).toMatchObject({ key: 'r1', state: 'PENDING', attempts: 0, target });
    const moved = await svc
      .api()
      .put('/timers/r1')
      .send({ delayMs: 300, target, payload: { n: 2 } });
    expect(moved.status).toBe(200);
    expect(Date.parse(moved.body.fireAt)).toBeLessThan(Date.parse(first.body.fireAt));
    await waitFor(async () => (await svc.api().get('/timers/r1')).body.state === 'DELIVERED', 10_000);
    const calls = callsOf('r1');
    expect(calls).toHaveLength(1);
    const body = calls[0]?.body as unknown as { payload: unknown; fireAt: string; attempt: number };
    expect(body.payload).toEqual({ n: 2 });
    expect(body.fireAt).toBe(moved.body.fireAt);
    expect(body.attempt).toBe(1);
    expect(calls[0]?.at).toBeGreaterThanOrEqual(Date.parse(moved.body.fireAt));
    const got = await svc.api().get('/timers/r1');
    expect(got.body).toMatchObject({ state: 'DELIVERED', attempts: 1 });
    expect(got.body.deliveredAt).not.toBeNull();
  });

  it('keep: creates once, then answers the timer as it is', async () => {
    const a = await svc.api().put('/timers/k1').send({ delayMs: 60_000, target, mode: 'keep', payload: 'a' });
    const b = await svc.api().put('/timers/k1').send({ delayMs: 1_000, target, mode: 'keep', payload: 'b' });
    expect([a.status, b.status]).toEqual([201, 200]);
    expect(b.body.fireAt).toBe(a.body.fireAt);
    expect(b.body.payload).toBe('a');
  });

  it('debounce: each call pushes the fire time, never past the first call + maxWaitMs', async () => {
    const a = await svc.api().put('/timers/d1').send({ delayMs: 2_000, maxWaitMs: 3_000, target, mode: 'debounce' });
    expect(a.status).toBe(201);
    const cap = Date.parse(a.body.maxWaitUntil);
    for (let i = 0; i < 3; i++) {
      const r = await svc.api().put('/timers/d1').send({ delayMs: 2_000, maxWaitMs: 3_000, target, mode: 'debounce', payload: i });
      expect(r.status).toBe(200);
      expect(Date.parse(r.body.fireAt)).toBeLessThanOrEqual(cap);
    }
    const late = await svc.api().put('/timers/d1').send({ delayMs: 60_000, target, mode: 'debounce' });
    expect(Date.parse(late.body.fireAt)).toBe(cap);
    await waitFor(async () => (await svc.api().get('/timers/d1')).body.state === 'DELIVERED', 15_000);
    expect(callsOf('d1')).toHaveLength(1);
    expect(callsOf('d1')[0]?.at).toBeGreaterThanOrEqual(cap);
  });

  it('cancel: a pending timer is CANCELLED and never delivered; again the same; a delivered one 409; unknown 404', async () => {
    await svc.api().put('/timers/c1').send({ delayMs: 500, target });
    const c = await svc.api().delete('/timers/c1');
    expect(c.status).toBe(200);
    expect(c.body.state).toBe('CANCELLED');
    expect((await svc.api().delete('/timers/c1')).status).toBe(200);
    await new Promise((r) => setTimeout(r, 1_000));
    expect(callsOf('c1')).toHaveLength(0);
    expect((await svc.api().delete('/timers/r1')).body.code).toBe('TIMER_DELIVERED');
    expect((await svc.api().delete('/timers/nope')).status).toBe(404);
  });

  it('refuses a target outside the allowlist, and brokers not configured, with nothing written', async () => {
    const r = await svc
      .api()
      .put('/timers/x1')
      .send({ delayMs: 10, target: { type: 'webhook', url: 'http://169.254.169.254/latest' } });
    expect(r.status).toBe(422);
    expect(r.body.code).toBe('TARGET_NOT_ALLOWED');
    const a = await svc
      .api()
      .put('/timers/x1')
      .send({ delayMs: 10, target: { type: 'amqp', exchange: 'e', routingKey: 'k' } });
    expect(a.body.code).toBe('TARGET_KIND_UNAVAILABLE');
    expect((await svc.api().get('/timers/x1')).status).toBe(404);
  });

  it('refuses bad input of every field with 400 and nothing written', async () => {
    const bad: unknown[] = [
      {},
      { target },
      { delayMs: 10, fireAt: new Date().toISOString(), target },
      { delayMs: -1, target },
      { delayMs: 1.5, target },
      { fireAt: 'tomorrow', target },
      { delayMs: 10, target: { type: 'ftp', url: 'x' } },
      { delayMs: 10, target: { type: 'webhook', url: 'file:///etc/passwd' } },
      { delayMs: 10, target: { type: 'nats', subject: 'a.*' } },
      { delayMs: 10, target, mode: 'later' },
      { delayMs: 10, target, maxWaitMs: 10 },
      { fireAt: new Date().toISOString(), target, mode: 'debounce' },
      { delayMs: 10, target, maxAttempts: 0 },
      { delayMs: 10, target, payload: 'x'.repeat(70_000) },
      { delayMs: 10, target, extra: 1 },
    ];
    for (const b of bad) {
      const r = await svc
        .api()
        .put('/timers/bad1')
        .send(b as object);
      expect(r.status, JSON.stringify(b).slice(0, 100)).toBeGreaterThanOrEqual(400);
      expect(r.status).toBeLessThan(500);
      expect(r.headers['content-type']).toMatch(/problem\+json/);
    }
    expect((await svc.api().put('/timers/bad key').send({ delayMs: 10, target })).body.code).toBe('INVALID_TIMER_KEY');
    expect((await svc.api().get('/timers/bad1')).status).toBe(404);
  });

  it('batch: creates and changes many, a result per item, a bad item refused alone', async () => {
    const timers = Array.from({ length: 50 }, (_, i) => ({ key: `b${i}`, delayMs: 60_000, target }));
    const r = await svc
      .api()
      .post('/timers/batch')
      .send({ timers: [...timers, { key: 'bbad', delayMs: -5, target }] });
    expect(r.status).toBe(200);
    expect(r.body.results.slice(0, 50).every((x: { status: number }) => x.status === 201)).toBe(true);
    expect(r.body.results[50]).toMatchObject({ key: 'bbad', status: 400 });
    const again = await svc
      .api()
      .post('/timers/batch')
      .send({ timers: timers.map((t) => ({ ...t, delayMs: 120_000 })) });
    expect(again.body.results.every((x: { status: number }) => x.status === 200)).toBe(true);
    const page = await svc.api().get('/timers?prefix=b&limit=20');
    expect(page.body.timers).toHaveLength(20);
    expect(page.body.nextCursor).toBe(page.body.timers[19].key);
  });

  it("keeps two clients apart: one client's key is another timer for the other", async () => {
    const other = await makeApiKey(tdb.url, undefined, 'other', 'acme');
    const api = () => request.agent(svc.url).set({ authorization: `Bearer ${other.key}` });
    expect((await api().get('/timers/k1')).status).toBe(404);
    const mine = await api().put('/timers/k1').send({ delayMs: 60_000, target, mode: 'keep', payload: 'acme' });
    expect(mine.status).toBe(201);
    expect((await svc.api().get('/timers/k1')).body.payload).toBe('a');
    expect((await api().delete('/timers/r1')).status).toBe(404);
  });
});
