// Timers delivered to a webhook end to end on a real service, database and
// Redis, with a local receiver: the body and headers, signed with the timer's
// client's own secret (none: unsigned), never before the fire time; retries
// to FAILED, the dead job redriven by an operator; a refusal final at once;
// changes and cancels before and during a call (409 while delivering, a
// debounce starting a new firing); a firing moved later whose old job comes
// due (the claim's early guard); the relay repairing a lost job; two clients'
// timers of one key signed each with its own secret.
import { Webhook as Verifier } from 'standardwebhooks';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { sleep, waitFor } from '../../helpers/redis.js';
import { bearer, makeApiKey, startTestService, stopTestService, type TestService } from '../../helpers/service.js';
import { type Answer, type Received, startWebhook, type Webhook } from '../../helpers/webhook.js';

const TOKEN = 'timers-delivery-test-admin-token-0123456789';
/** Long enough for a state to settle on a machine twice as slow as a busy CI runner. */
const SETTLE_MS = 15_000;
/** The slow receiver's answer time: the requests made during the call take a small part of it. */
const SLOW_CALL_MS = 3_000;

type TimerBody = { key: string; payload: unknown; fireAt: string; firedAt: string; attempt: number };
type Api = () => ReturnType<TestService['api']>;

let tdb: TestDb;
let svc: TestService;
let hook: Webhook;
let target: { type: 'webhook'; url: string };
/** The default client's webhook secret, made before any of its timers fires. */
let defaultSecret: string;
/** Clients of their own: `plain` has no secret, `acme` and `globex` each one. */
let clients: { plain: { api: Api }; acme: { api: Api; secret: string }; globex: { api: Api; secret: string } };

/** Per key, how the receiver answers the nth call (1-based) of that key; 'ok' otherwise. */
const answers = new Map<string, (nth: number) => Answer>();

const bodyOf = (c: Received) => c.body as unknown as TimerBody;
const callsOf = (key: string, client?: string) =>
  hook.calls.filter((c) => bodyOf(c).key === key && (client === undefined || (bodyOf(c).payload as { client?: string } | null)?.client === client));
const deliveredOf = (key: string) => hook.delivered.filter((c) => bodyOf(c).key === key);

const admin = () => ({
  get: (path: string) => request(svc.url).get(path).set(bearer(TOKEN)),
  post: (path: string) => request(svc.url).post(path).set(bearer(TOKEN)),
});

async function makeSecret(client: string): Promise<string> {
  const res = await admin().post(`/admin/clients/${client}/webhook-secrets`);
  expect(res.status).toBe(201);
  return res.body.secret as string;
}

const verifies = (secret: string, call: Received): boolean => {
  try {
    new Verifier(secret).verify(call.raw, call.headers);
    return true;
  } catch {
    return false;
  }
};

/** The id of the timer's current firing (its delivery row): the message id, not in the API's answer. */
async function rowIdOf(client: string, key: string): Promise<string> {
  const rows = await tdb.db.$queryRaw<{ id: string }[]>`SELECT notification_id::text AS id FROM timers WHERE client = ${client} AND key = ${key}`;
  const id = rows[0]?.id;
  if (!id) throw new Error(`no timer ${client}/${key}`);
  return id;
}

async function timerOf(api: Api, key: string) {
  const r = await api().get(`/timers/${key}`);
  expect(r.status).toBe(200);
  return r.body as { state: string; fireAt: string; attempts: number; lastError: string | null; deliveredAt: string | null; payload: unknown };
}

async function waitState(api: Api, key: string, state: string): Promise<void> {
  const reached = await waitFor(async () => (await timerOf(api, key)).state === state, SETTLE_MS, 50);
  expect(reached, `${key} reaches ${state} (is ${(await timerOf(api, key)).state})`).toBe(true);
}

beforeAll(async () => {
  tdb = await createTestDb('timers_delivery');
  hook = await startWebhook((_, body) => {
    const key = (body as unknown as TimerBody).key;
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
  // Secrets before any timer: the service believes a client's keys for 5 s once read.
  defaultSecret = await makeSecret('default');
  const apiOf = async (client: string): Promise<Api> => {
    const { key } = await makeApiKey(tdb.url, undefined, client, client);
    return () => request.agent(svc.url).set(bearer(key));
  };
  clients = {
    plain: { api: await apiOf('plain') },
    acme: { api: await apiOf('acme'), secret: await makeSecret('acme') },
    globex: { api: await apiOf('globex'), secret: await makeSecret('globex') },
  };
});
afterAll(async () => {
  await stopTestService(svc, tdb);
  await hook?.close();
});

describe('timers delivered to a webhook', () => {
  it('POSTs {key, payload, fireAt, firedAt, attempt} no earlier than fireAt, signed with its client secret, the firing as webhook-id; DELIVERED, attempts 1', async () => {
    const put = await svc
      .api()
      .put('/timers/w1')
      .send({ delayMs: 300, target, payload: { order: 42 } });
    expect(put.status).toBe(201);
    await waitState(svc.api, 'w1', 'DELIVERED');
    const calls = callsOf('w1');
    expect(calls).toHaveLength(1);
    const call = calls[0] as Received;
    const fireAt = Date.parse(put.body.fireAt);
    expect(bodyOf(call)).toEqual({ key: 'w1', payload: { order: 42 }, fireAt: put.body.fireAt, firedAt: expect.any(String), attempt: 1 });
    expect(call.at).toBeGreaterThanOrEqual(fireAt);
    expect(Date.parse(bodyOf(call).firedAt)).toBeGreaterThanOrEqual(fireAt);
    const rowId = await rowIdOf('default', 'w1');
    expect(call.headers['webhook-id']).toBe(rowId);
    expect(call.headers['idempotency-key']).toBe(rowId);
    expect(verifies(defaultSecret, call)).toBe(true);
    expect(verifies(clients.acme.secret, call)).toBe(false);
    const t = await timerOf(svc.api, 'w1');
    expect(t).toMatchObject({ state: 'DELIVERED', attempts: 1, lastError: null });
    expect(Date.parse(t.deliveredAt as string)).toBeGreaterThanOrEqual(fireAt);
  });

  it('calls unsigned for a client with no secret, still with its Idempotency-Key and webhook-id', async () => {
    const { api } = clients.plain;
    const put = await api()
      .put('/timers/u1')
      .send({ delayMs: 200, target, payload: { client: 'plain' } });
    expect(put.status).toBe(201);
    await waitState(api, 'u1', 'DELIVERED');
    const calls = callsOf('u1');
    expect(calls).toHaveLength(1);
    const call = calls[0] as Received;
    expect(call.at).toBeGreaterThanOrEqual(Date.parse(put.body.fireAt));
    expect(call.headers['idempotency-key']).toBe(await rowIdOf('plain', 'u1'));
    expect(call.headers['webhook-id']).toBe(call.headers['idempotency-key']);
    expect(call.headers['webhook-signature']).toBeUndefined();
    expect(call.headers['webhook-timestamp']).toBeUndefined();
    expect(await timerOf(api, 'u1')).toMatchObject({ state: 'DELIVERED', attempts: 1 });
  });

  it('retries a 503 up to maxAttempts with one webhook-id, ends FAILED in the dead set; a redrive delivers it once more', async () => {
    answers.set('f1', () => 'fail');
    const put = await svc.api().put('/timers/f1').send({ delayMs: 0, target, maxAttempts: 3 });
    expect(put.status).toBe(201);
    await waitState(svc.api, 'f1', 'FAILED');
    const rowId = await rowIdOf('default', 'f1');
    const calls = callsOf('f1');
    expect(calls.map((c) => bodyOf(c).attempt)).toEqual([1, 2, 3]);
    for (const c of calls) {
      expect(c.headers['webhook-id']).toBe(rowId);
      expect(c.headers['idempotency-key']).toBe(rowId);
      expect(verifies(defaultSecret, c)).toBe(true);
    }
    const failed = await timerOf(svc.api, 'f1');
    expect(failed).toMatchObject({ state: 'FAILED', attempts: 3, deliveredAt: null });
    expect(failed.lastError).toMatch(/503/);

    const jobId = `notification:${rowId}:deliver`;
    const dead = await admin().get('/admin/queues/timers/dead');
    expect(dead.status).toBe(200);
    const job = (dead.body.jobs as { id: string; state: string; lastError: string | null }[]).find((j) => j.id === jobId);
    expect(job).toMatchObject({ state: 'dead' });
    expect(job?.lastError).toMatch(/503/);

    answers.set('f1', () => 'ok');
    const redriven = await admin().post(`/admin/queues/timers/dead/${encodeURIComponent(jobId)}/redrive`);
    expect(redriven.status).toBe(200);
    await waitState(svc.api, 'f1', 'DELIVERED');
    const after = callsOf('f1');
    expect(after).toHaveLength(4);
    expect(after[3]?.headers['webhook-id']).toBe(rowId);
    expect(verifies(defaultSecret, after[3] as Received)).toBe(true);
    expect(deliveredOf('f1')).toHaveLength(1);
    const again = await admin().get('/admin/queues/timers/dead');
    expect((again.body.jobs as { id: string }[]).some((j) => j.id === jobId)).toBe(false);
  });

  it('ends FAILED at once when the receiver refuses (400), with no retry', async () => {
    answers.set('x1', () => 'reject');
    const put = await svc.api().put('/timers/x1').send({ delayMs: 0, target, maxAttempts: 5 });
    expect(put.status).toBe(201);
    await waitState(svc.api, 'x1', 'FAILED');
    // Several retry spacings (100 ms): a retry would have come by now.
    await sleep(1_000);
    expect(callsOf('x1')).toHaveLength(1);
    const t = await timerOf(svc.api, 'x1');
    expect(t).toMatchObject({ state: 'FAILED', attempts: 1 });
    expect(t.lastError).toMatch(/400/);
  });
});

describe('changes and cancels before and during a delivery', () => {
  it('a cancel committed before the fire time: never delivered', async () => {
    const put = await svc.api().put('/timers/c1').send({ delayMs: 800, target });
    expect(put.status).toBe(201);
    const c = await svc.api().delete('/timers/c1');
    expect(c.status).toBe(200);
    expect(c.body.state).toBe('CANCELLED');
    // Well past the fire time: its job ran and found the firing cancelled.
    await sleep(Math.max(0, Date.parse(put.body.fireAt) - Date.now()) + 1_500);
    expect(callsOf('c1')).toHaveLength(0);
    expect((await timerOf(svc.api, 'c1')).state).toBe('CANCELLED');
  });

  it('while its call runs: a replace and a cancel are refused 409 TIMER_DELIVERING and change nothing; the call decides (DELIVERED)', async () => {
    answers.set('h1', (n) => (n === 1 ? { slowMs: SLOW_CALL_MS, then: 'ok' } : 'ok'));
    const put = await svc.api().put('/timers/h1').send({ delayMs: 0, target, payload: 'first' });
    expect(put.status).toBe(201);
    expect(await waitFor(() => callsOf('h1').length === 1, SETTLE_MS)).toBe(true);
    expect((await timerOf(svc.api, 'h1')).state).toBe('DELIVERING');
    const replace = await svc.api().put('/timers/h1').send({ delayMs: 60_000, target, payload: 'second' });
    expect(replace.status).toBe(409);
    expect(replace.body.code).toBe('TIMER_DELIVERING');
    const cancel = await svc.api().delete('/timers/h1');
    expect(cancel.status).toBe(409);
    expect(cancel.body.code).toBe('TIMER_DELIVERING');
    expect(await timerOf(svc.api, 'h1')).toMatchObject({ state: 'DELIVERING', fireAt: put.body.fireAt, payload: 'first' });
    await waitState(svc.api, 'h1', 'DELIVERED');
    expect(await timerOf(svc.api, 'h1')).toMatchObject({ fireAt: put.body.fireAt, payload: 'first', attempts: 1 });
    // A retry spacing and more: no second call came.
    await sleep(500);
    expect(callsOf('h1')).toHaveLength(1);
    expect(deliveredOf('h1')).toHaveLength(1);
  });

  it('while its call runs: a debounce starts a new firing (201), delivered once after it with another webhook-id', async () => {
    answers.set('d1', (n) => (n === 1 ? { slowMs: SLOW_CALL_MS, then: 'ok' } : 'ok'));
    const first = await svc.api().put('/timers/d1').send({ delayMs: 0, target, mode: 'debounce', payload: 'burst1' });
    expect(first.status).toBe(201);
    expect(await waitFor(() => callsOf('d1').length === 1, SETTLE_MS)).toBe(true);
    const next = await svc.api().put('/timers/d1').send({ delayMs: 300, target, mode: 'debounce', payload: 'burst2' });
    expect(next.status).toBe(201);
    expect(next.body).toMatchObject({ state: 'PENDING', payload: 'burst2' });
    expect(await waitFor(() => deliveredOf('d1').length === 2, SETTLE_MS)).toBe(true);
    await waitState(svc.api, 'd1', 'DELIVERED');
    await sleep(500);
    const calls = callsOf('d1');
    expect(calls).toHaveLength(2);
    const [a, b] = calls as [Received, Received];
    expect(bodyOf(a)).toMatchObject({ payload: 'burst1', fireAt: first.body.fireAt, attempt: 1 });
    expect(bodyOf(b)).toMatchObject({ payload: 'burst2', fireAt: next.body.fireAt, attempt: 1 });
    expect(b.at).toBeGreaterThanOrEqual(Date.parse(next.body.fireAt));
    expect(a.headers['webhook-id']).not.toBe(b.headers['webhook-id']);
    expect(b.headers['webhook-id']).toBe(await rowIdOf('default', 'd1'));
    expect(await timerOf(svc.api, 'd1')).toMatchObject({ state: 'DELIVERED', payload: 'burst2', fireAt: next.body.fireAt, attempts: 1 });
  });

  it('a replace moving a pending timer later: delivered once, never before the new fire time', async () => {
    await svc.api().put('/timers/m1').send({ delayMs: 300, target, payload: 'old' });
    const later = await svc.api().put('/timers/m1').send({ delayMs: 1_500, target, payload: 'new' });
    expect(later.status).toBe(200);
    await waitState(svc.api, 'm1', 'DELIVERED');
    await sleep(300);
    const calls = callsOf('m1');
    expect(calls).toHaveLength(1);
    expect(calls[0]?.at).toBeGreaterThanOrEqual(Date.parse(later.body.fireAt));
    expect(bodyOf(calls[0] as Received)).toMatchObject({ payload: 'new', fireAt: later.body.fireAt });
  });

  it('a firing moved later whose old job still comes due (its replacement lost) is not delivered early', async () => {
    // One attempt: the early look must hand the job back without spending it.
    const put = await svc.api().put('/timers/m2').send({ delayMs: 1_500, target, maxAttempts: 1 });
    expect(put.status).toBe(201);
    const rowId = await rowIdOf('default', 'm2');
    // The job due now while its row is due later: what a move leaves when the
    // job's upsert after the commit was lost (Redis away) and the old job runs.
    const moved = await svc.module('timers').queue.reschedule(`notification:${rowId}:deliver`, { delayMs: 0 });
    expect(moved.status).toBe('updated');
    await waitState(svc.api, 'm2', 'DELIVERED');
    await sleep(300);
    const calls = callsOf('m2');
    expect(calls).toHaveLength(1);
    expect(calls[0]?.at).toBeGreaterThanOrEqual(Date.parse(put.body.fireAt));
    expect(await timerOf(svc.api, 'm2')).toMatchObject({ state: 'DELIVERED', attempts: 1 });
  });
});

describe('repair and isolation', () => {
  it('the relay schedules again the delivery job Redis lost, and the timer is delivered', async () => {
    const put = await svc.api().put('/timers/lost1').send({ delayMs: 1_000, target });
    expect(put.status).toBe(201);
    const rowId = await rowIdOf('default', 'lost1');
    const timers = svc.module('timers');
    expect(await timers.queue.cancel(`notification:${rowId}:deliver`)).toMatchObject({ cancelled: true, state: 'pending' });
    // Past its fire time, nothing came: the job is gone.
    await sleep(Math.max(0, Date.parse(put.body.fireAt) - Date.now()) + 500);
    expect(callsOf('lost1')).toHaveLength(0);
    expect((await timerOf(svc.api, 'lost1')).state).toBe('PENDING');
    // The relay leaves a firing younger than a few seconds (its schedule may be on its way): it runs until it takes this one.
    const { relay } = timers as unknown as { relay: { run(): Promise<{ handed: number; abandoned: number }> } };
    let handed = 0;
    expect(await waitFor(async () => (handed += (await relay.run()).handed) > 0, SETTLE_MS, 250)).toBe(true);
    expect(handed).toBe(1);
    await waitState(svc.api, 'lost1', 'DELIVERED');
    const calls = callsOf('lost1');
    expect(calls).toHaveLength(1);
    expect(calls[0]?.headers['webhook-id']).toBe(rowId);
    expect(calls[0]?.at).toBeGreaterThanOrEqual(Date.parse(put.body.fireAt));
  });

  it("two clients' timers of one key both fire, each signed with its own client's secret only", async () => {
    const { acme, globex } = clients;
    const a = await acme
      .api()
      .put('/timers/same')
      .send({ delayMs: 200, target, payload: { client: 'acme' } });
    const g = await globex
      .api()
      .put('/timers/same')
      .send({ delayMs: 200, target, payload: { client: 'globex' } });
    expect([a.status, g.status]).toEqual([201, 201]);
    await waitState(acme.api, 'same', 'DELIVERED');
    await waitState(globex.api, 'same', 'DELIVERED');
    const [ca] = callsOf('same', 'acme');
    const [cg] = callsOf('same', 'globex');
    expect(callsOf('same')).toHaveLength(2);
    expect(ca?.headers['webhook-id']).toBe(await rowIdOf('acme', 'same'));
    expect(cg?.headers['webhook-id']).toBe(await rowIdOf('globex', 'same'));
    expect(verifies(acme.secret, ca as Received)).toBe(true);
    expect(verifies(globex.secret, ca as Received)).toBe(false);
    expect(verifies(defaultSecret, ca as Received)).toBe(false);
    expect(verifies(globex.secret, cg as Received)).toBe(true);
    expect(verifies(acme.secret, cg as Received)).toBe(false);
    expect(verifies(defaultSecret, cg as Received)).toBe(false);
    expect(ca?.headers['webhook-signature']?.split(' ')).toHaveLength(1);
  });
});
