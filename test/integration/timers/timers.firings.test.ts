// A timer's older firings (after a debounce during a call, or a replace of a
// FAILED firing) are withdrawn with the new firing: nothing of them is
// delivered after the client cancelled or replaced the timer, even a redrive.
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { sleep, waitFor } from '../../helpers/redis.js';
import { bearer, startTestService, stopTestService, type TestService } from '../../helpers/service.js';
import { type Answer, type Received, startWebhook, type Webhook } from '../../helpers/webhook.js';

const TOKEN = 'timers-firings-admin-token-0123456789abcdef';
let tdb: TestDb;
let svc: TestService;
let hook: Webhook;
let target: { type: 'webhook'; url: string };
const answers = new Map<string, (nth: number) => Answer>();
type Body = { key: string; payload: unknown; fireAt: string; attempt: number };
const bodyOf = (c: Received) => c.body as unknown as Body;
const callsOf = (key: string) => hook.calls.filter((c) => bodyOf(c).key === key);
const deliveredOf = (key: string) => hook.delivered.filter((c) => bodyOf(c).key === key);

beforeAll(async () => {
  tdb = await createTestDb('timers_firings');
  hook = await startWebhook((_, body) => {
    const key = (body as unknown as Body).key;
    return answers.get(key)?.(callsOf(key).length) ?? 'ok';
  });
  target = { type: 'webhook', url: `${hook.url}/timers` };
  svc = await startTestService(tdb.url, {
    ADMIN_TOKEN: TOKEN,
    TIMER_WEBHOOK_HOSTS: `127.0.0.1:${new URL(hook.url).port}`,
    TIMER_WEBHOOK_RETRY_DELAYS_MS: '100',
    NOTIFY_RETRY_JITTER: '0',
    TIMER_RELAY_INTERVAL_SECONDS: '3600',
  });
});
afterAll(async () => {
  await stopTestService(svc, tdb);
  await hook?.close();
});

const stateOf = async (key: string) => (await svc.api().get(`/timers/${key}`)).body as { state: string; payload: unknown };

describe("a timer's older firings", () => {
  it('a debounce during a call that then fails, then DELETE (200 CANCELLED): the older firing is not retried', async () => {
    answers.set('o1', (n) => (n === 1 ? { slowMs: 2_000, then: 'fail' } : 'ok'));
    expect((await svc.api().put('/timers/o1').send({ delayMs: 0, target, mode: 'debounce', payload: 'first' })).status).toBe(201);
    expect(await waitFor(() => callsOf('o1').length === 1, 10_000)).toBe(true);
    const d = await svc.api().put('/timers/o1').send({ delayMs: 60_000, target, mode: 'debounce', payload: 'second' });
    expect(d.status).toBe(201);
    const del = await svc.api().delete('/timers/o1');
    expect(del.status).toBe(200);
    expect(del.body.state).toBe('CANCELLED');
    const cancelledAt = Date.now();
    await sleep(4_000);
    const after = deliveredOf('o1').filter((c) => c.at > cancelledAt);
    expect(after).toHaveLength(0);
  });

  it('a replace of a FAILED timer, then DELETE; an operator redrives the dead job: nothing is delivered', async () => {
    answers.set('o2', (n) => (n === 1 ? 'fail' : 'ok'));
    expect((await svc.api().put('/timers/o2').send({ delayMs: 0, target, maxAttempts: 1, payload: 'old' })).status).toBe(201);
    expect(await waitFor(async () => (await stateOf('o2')).state === 'FAILED', 10_000)).toBe(true);
    const oldRow = (await tdb.db.$queryRaw<{ id: string }[]>`SELECT notification_id::text AS id FROM timers WHERE key = 'o2'`)[0]?.id;
    const replaced = await svc.api().put('/timers/o2').send({ delayMs: 60_000, target, payload: 'new' });
    expect(replaced.status).toBe(201);
    const del = await svc.api().delete('/timers/o2');
    expect(del.body.state).toBe('CANCELLED');
    const jobId = `notification:${oldRow}:deliver`;
    const rd = await request(svc.url)
      .post(`/admin/queues/timers/dead/${encodeURIComponent(jobId)}/redrive`)
      .set(bearer(TOKEN));
    expect(rd.status).toBe(200);
    await sleep(2_000);
    const got = deliveredOf('o2').map((c) => bodyOf(c).payload);
    expect((await stateOf('o2')).state).toBe('CANCELLED');
    expect(got).toHaveLength(0);
  });

  it('redrive-all after an outage: a timer the client re-PUT after it FAILED is delivered once', async () => {
    answers.set('o3', (n) => (n === 1 ? 'fail' : 'ok'));
    expect((await svc.api().put('/timers/o3').send({ delayMs: 0, target, maxAttempts: 1, payload: 'v1' })).status).toBe(201);
    expect(await waitFor(async () => (await stateOf('o3')).state === 'FAILED', 10_000)).toBe(true);
    const oldRow = (await tdb.db.$queryRaw<{ id: string }[]>`SELECT notification_id::text AS id FROM timers WHERE key = 'o3'`)[0]?.id;
    // The client sets it again (its receiver is back).
    expect((await svc.api().put('/timers/o3').send({ delayMs: 0, target, payload: 'v2' })).status).toBe(201);
    expect(await waitFor(async () => (await stateOf('o3')).state === 'DELIVERED', 10_000)).toBe(true);
    const rd = await request(svc.url)
      .post(`/admin/queues/timers/dead/${encodeURIComponent(`notification:${oldRow}:deliver`)}/redrive`)
      .set(bearer(TOKEN));
    expect(rd.status).toBe(200);
    await sleep(2_000);
    const got = deliveredOf('o3');
    expect(got).toHaveLength(1);
  });
});

describe('debounce maximum wait', () => {
  it("a burst keeps its first call's maximum wait, none included", async () => {
    const first = await svc.api().put('/timers/mw1').send({ delayMs: 60_000, target, mode: 'debounce' });
    expect(first.status).toBe(201);
    expect(first.body.maxWaitUntil).toBeNull();
    await sleep(1_500);
    const second = await svc.api().put('/timers/mw1').send({ delayMs: 60_000, target, mode: 'debounce', maxWaitMs: 1_000 });
    // The burst began without a maximum wait: a later call's does not cap it (else it would be already past).
    expect(second.status).toBe(200);
    expect(second.body.maxWaitUntil).toBeNull();
    expect(Date.parse(second.body.fireAt)).toBeGreaterThan(Date.now() + 30_000);
  });
});
