// Input edge cases of the timers API on the real service: payloads jsonb
// cannot hold, a bad key in one batch item, the allowlist's URL parsing, a
// debounce maximum wait beyond 32 bits.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { startTestService, stopTestService, type TestService } from '../../helpers/service.js';
import { startWebhook, type Webhook } from '../../helpers/webhook.js';

let tdb: TestDb;
let svc: TestService;
let hook: Webhook;
let target: { type: 'webhook'; url: string };
let port: string;

beforeAll(async () => {
  tdb = await createTestDb('timers_input');
  hook = await startWebhook();
  port = new URL(hook.url).port;
  target = { type: 'webhook', url: `${hook.url}/timers` };
  svc = await startTestService(tdb.url, {
    TIMER_WEBHOOK_HOSTS: `127.0.0.1:${port},allowed.example,api.example:8443`,
    TIMER_WEBHOOK_RETRY_DELAYS_MS: '100',
    NOTIFY_RETRY_JITTER: '0',
    TIMER_RELAY_INTERVAL_SECONDS: '3600',
  });
});
afterAll(async () => {
  await stopTestService(svc, tdb);
  await hook?.close();
});

const count = async () => (await tdb.db.$queryRaw<{ n: bigint }[]>`SELECT count(*) AS n FROM timers`)[0]?.n;

describe('payloads PostgreSQL jsonb cannot hold', () => {
  it('refuses a NUL character in the payload with 400, nothing written', async () => {
    const before = await count();
    const r = await svc
      .api()
      .put('/timers/nul1')
      .send({ delayMs: 60_000, target, payload: { s: 'a\u0000b' } });
    expect({ status: r.status, code: r.body.code, path: r.body.errors?.[0]?.path }).toEqual({ status: 400, code: 'VALIDATION_FAILED', path: 'payload' });
    expect(await count()).toBe(before);
  });

  it('refuses a lone surrogate in the payload with 400', async () => {
    const raw = `{"delayMs":60000,"target":${JSON.stringify(target)},"payload":"\\ud800"}`;
    const r = await svc.api().put('/timers/sur1').set('content-type', 'application/json').send(raw);
    expect({ status: r.status, code: r.body.code }).toEqual({ status: 400, code: 'VALIDATION_FAILED' });
  });

  it('batch: refuses the one item with a NUL payload, creates the good ones', async () => {
    const before = await count();
    const r = await svc
      .api()
      .post('/timers/batch')
      .send({
        timers: [
          { key: 'bn1', delayMs: 60_000, target },
          { key: 'bn2', delayMs: 60_000, target, payload: 'x\u0000' },
          { key: 'bn3', delayMs: 60_000, target },
        ],
      });
    expect(r.status).toBe(200);
    expect(r.body.results.map((x: { status: number }) => x.status)).toEqual([201, 400, 201]);
    expect(r.body.results[1].error.code).toBe('VALIDATION_FAILED');
    expect(await count()).toBe((before ?? 0n) + 2n);
  });

  it('refuses a replace with a NUL payload, the timer unchanged', async () => {
    expect((await svc.api().put('/timers/nul2').send({ delayMs: 60_000, target })).status).toBe(201);
    const r = await svc.api().put('/timers/nul2').send({ delayMs: 60_000, target, payload: 'x\u0000' });
    expect(r.status).toBe(400);
    expect((await svc.api().get('/timers/nul2')).body.payload).toBeNull();
  });
});

describe('batch key validation', () => {
  it('refuses the one batch item with a bad key, alone', async () => {
    const r = await svc
      .api()
      .post('/timers/batch')
      .send({
        timers: [
          { key: 'ok1', delayMs: 60_000, target },
          { key: 'bad key', delayMs: 60_000, target },
        ],
      });
    expect(r.status).toBe(200);
    expect(r.body.results.map((x: { status: number; error?: { code: string } }) => [x.status, x.error?.code])).toEqual([
      [201, undefined],
      [400, 'INVALID_TIMER_KEY'],
    ]);
  });
});

describe('allowlist parsing', () => {
  const tries: [string, boolean][] = [
    ['http://allowed.example/x', true],
    ['https://allowed.example/x', true],
    ['http://ALLOWED.example/x', true],
    ['http://allowed.example:80/x', true],
    ['https://allowed.example:443/x', true],
    ['http://allowed.example:8080/x', false],
    ['http://allowed.example./x', false],
    ['http://allowed.example%2e/x', false],
    ['http://user:pw@allowed.example/x', false],
    ['http://allowed.example@evil.example/x', false],
    ['http://evil.example\\@allowed.example/x', false],
    ['http://evil.example#@allowed.example/x', false],
    ['http://evil.example?@allowed.example/x', false],
    ['http://allowed.example.evil.example/x', false],
    ['https://api.example:8443/x', true],
    ['http://api.example:8443/x', true],
    ['https://api.example/x', false],
    ['http://[::ffff:127.0.0.1]:PORT/x', false],
    ['http://127.1:PORT/x', true],
    ['http://2130706433:PORT/x', true],
    ['http://0x7f.0.0.1:PORT/x', true],
    ['http://localhost:PORT/x', false],
    ['http://127.0.0.1:0PORT/x', true],
    ['http://allowed.example%00.evil/x', false],
  ];
  it('each URL is allowed or refused as expected', async () => {
    const wrong: string[] = [];
    for (const [u0, want] of tries) {
      const u = u0.replace('PORT', port);
      const r = await svc
        .api()
        .put('/timers/ssrf1')
        .send({ delayMs: 3_600_000, target: { type: 'webhook', url: u } });
      const allowed = r.status === 201 || r.status === 200;
      if (allowed !== want) wrong.push(`${r.status} ${r.body.code ?? ''} ${u}`);
      if (allowed) await svc.api().delete('/timers/ssrf1');
    }
    expect(wrong).toEqual([]);
  });
});

describe('debounce maxWaitMs beyond 32 bits', () => {
  it('takes a maxWaitMs of 30 days', async () => {
    const before = await count();
    const r = await svc
      .api()
      .put('/timers/mw30')
      .send({ delayMs: 60_000, target, mode: 'debounce', maxWaitMs: 30 * 86_400_000 });
    expect(r.status).toBe(201);
    expect(await count()).toBe((before ?? 0n) + 1n);
    expect(Date.parse(r.body.maxWaitUntil) - Date.parse(r.body.createdAt)).toBeGreaterThan(29 * 86_400_000);
  });
  it('takes it on an existing pending timer too', async () => {
    expect((await svc.api().put('/timers/mw31').send({ delayMs: 60_000, target, mode: 'debounce' })).status).toBe(201);
    const r = await svc
      .api()
      .put('/timers/mw31')
      .send({ delayMs: 60_000, target, mode: 'debounce', maxWaitMs: 30 * 86_400_000 });
    expect(r.status).toBe(200);
  });
});
