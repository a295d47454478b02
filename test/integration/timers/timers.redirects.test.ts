// Redirects from an allowed webhook host (followed only within its origin),
// and a payload's body limit.
import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { waitFor } from '../../helpers/redis.js';
import { startTestService, stopTestService, type TestService } from '../../helpers/service.js';

let tdb: TestDb;
let svc: TestService;
let allowed: Server;
let other: Server;
let aPort = 0;
let oPort = 0;
const hits: string[] = [];

function listen(s: Server): Promise<number> {
  return new Promise((r) => s.listen(0, '127.0.0.1', () => r((s.address() as { port: number }).port)));
}

beforeAll(async () => {
  other = createServer((req, res) => {
    hits.push(`other ${req.url}`);
    res.statusCode = 204;
    res.end();
  });
  oPort = await listen(other);
  allowed = createServer((req, res) => {
    hits.push(`allowed ${req.url}`);
    const u = req.url ?? '';
    const to: Record<string, string> = {
      '/cross': `http://127.0.0.1:${oPort}/stolen`,
      '/cross-host-same-port': `http://localhost:${aPort}/final`,
      '/proto-rel': `//127.0.0.1:${oPort}/stolen2`,
      '/same': `/final`,
      '/userinfo': `http://x:y@127.0.0.1:${aPort}/final`,
      '/loop': `/loop`,
    };
    if (to[u]) {
      res.writeHead(307, { location: to[u] });
      res.end();
      return;
    }
    res.statusCode = 204;
    res.end();
  });
  aPort = await listen(allowed);
  tdb = await createTestDb('timers_redirects');
  svc = await startTestService(tdb.url, {
    TIMER_WEBHOOK_HOSTS: `127.0.0.1:${aPort}`,
    TIMER_WEBHOOK_RETRY_DELAYS_MS: '100',
    NOTIFY_RETRY_JITTER: '0',
    TIMER_RELAY_INTERVAL_SECONDS: '3600',
  });
});
afterAll(async () => {
  await stopTestService(svc, tdb);
  allowed?.close();
  other?.close();
});

it('follows 307 only within the origin: another host or port is never called, the timer FAILED', async () => {
  const out: Record<string, string> = {};
  for (const path of ['/cross', '/cross-host-same-port', '/proto-rel', '/same', '/userinfo', '/loop']) {
    const key = `r${path.replace(/[^a-z]/g, '')}`;
    const r = await svc
      .api()
      .put(`/timers/${key}`)
      .send({ delayMs: 0, target: { type: 'webhook', url: `http://127.0.0.1:${aPort}${path}` }, maxAttempts: 2 });
    expect(r.status).toBe(201);
    await waitFor(async () => ['DELIVERED', 'FAILED'].includes((await svc.api().get(`/timers/${key}`)).body.state), 10_000);
    const t = (await svc.api().get(`/timers/${key}`)).body;
    out[path] = t.state;
  }
  expect(out).toEqual({
    '/cross': 'FAILED',
    '/cross-host-same-port': 'FAILED',
    '/proto-rel': 'FAILED',
    '/same': 'DELIVERED',
    '/userinfo': 'FAILED',
    '/loop': 'FAILED',
  });
  expect(hits.some((h) => h.startsWith('other'))).toBe(false);
});

it('takes a payload within 64 KiB written with \\u escapes (as Python json.dumps sends non-ASCII)', async () => {
  const text = 'é'.repeat(20_000); // 40 000 bytes as JSON text
  const escaped = `{"delayMs":3600000,"target":{"type":"webhook","url":"http://127.0.0.1:${aPort}/x"},"payload":"${'\\u00e9'.repeat(20_000)}"}`;
  const raw = await svc
    .api()
    .put('/timers/esc1')
    .send({ delayMs: 3_600_000, target: { type: 'webhook', url: `http://127.0.0.1:${aPort}/x` }, payload: text });
  const esc = await svc.api().put('/timers/esc2').set('content-type', 'application/json').send(escaped);
  expect([raw.status, esc.status]).toEqual([201, 201]);
});
