// The service as a process and as an app: config errors stop it with the
// variable's name, it starts and stops on SIGTERM, honours the Redis database
// index, warns about an evicting Redis, refuses queue data of an old layout,
// and answers errors as problem+json.
import { loadConfig } from '../../../src/config.js';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import request from 'supertest';
import { afterAll, describe, expect, it } from 'vitest';
import { createApp } from '../../../src/app.js';
import { createLogger } from '../../../src/core/logger.js';
import { createRedis } from '../../../src/core/redis.js';
import { checkEvictionPolicy } from '../../../src/queue/checks/eviction-check.js';
import { QueueLayoutError, checkQueueLayout } from '../../../src/queue/checks/layout-check.js';
import { type Queue, createQueue } from '../../../src/queue/producer/queue.js';
import type { QueueLogger } from '../../../src/queue/types.js';
import { createTestDb } from '../../helpers/db.js';
import { REDIS_URL, dropQueue, uniqueQueueName, waitFor } from '../../helpers/redis.js';
import { freePort, startPrivateRedis } from '../../helpers/redis-server.js';

const MAIN = fileURLToPath(new URL('../../../src/main.ts', import.meta.url));

function runMain(args: string[], env: Record<string, string>) {
  const child = spawn(process.execPath, ['--import', 'tsx', MAIN, ...args], {
    env: { ...process.env, LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  return { child, output: () => out, exited };
}

describe('service process', () => {
  it('refuses a wrong value, naming the variable', async () => {
    const p = runMain([], { PORT: 'eighty', REDIS_URL: REDIS_URL });
    expect(await p.exited).toBe(1);
    expect(p.output()).toMatch(/PORT: .*"eighty"/);
  });

  it('refuses an unknown subcommand', async () => {
    const p = runMain(['dance'], {});
    expect(await p.exited).toBe(2);
    expect(p.output()).toMatch(/usage: main \[all\|api\|worker\|migrate\|stats \[--watch\]\|keys \.\.\.\|ungroup\|reshard \.\.\.\]/);
  });

  it('starts, answers /healthz and /readyz, and stops cleanly on SIGTERM', async () => {
    const port = await freePort();
    const tdb = await createTestDb('service', { migrate: false });
    const p = runMain(['api'], { PORT: String(port), HOST: '127.0.0.1', REDIS_URL, DATABASE_URL: tdb.url, QUEUE_PREFIX: 'svc-test' });
    expect(await waitFor(() => p.output().includes('service started'), 20_000, 50)).toBe(true);
    const res = await fetch(`http://127.0.0.1:${port}/healthz`);
    expect(res.status).toBe(200);
    const ready = await fetch(`http://127.0.0.1:${port}/readyz`);
    expect(ready.status).toBe(200);
    expect(p.output()).toContain('using PostgreSQL from DATABASE_URL');
    p.child.kill('SIGTERM');
    expect(await p.exited).toBe(0);
    expect(p.output()).toContain('"msg":"stopped"');
    await tdb.drop();
  });
});

describe('redis connections', () => {
  it('honours the database index in REDIS_URL', async () => {
    const r = createRedis(`${REDIS_URL}/7`, 'db-index-test');
    try {
      const info = String(await r.client('INFO'));
      expect(info).toMatch(/\bdb=7\b/);
    } finally {
      r.disconnect();
    }
  });

  it('warns when Redis may evict keys, and not when it may not', async () => {
    const srv = await startPrivateRedis(['--maxmemory-policy', 'allkeys-lru']);
    const warnings: string[] = [];
    const log: QueueLogger = { debug() {}, info() {}, error() {}, warn: (_o, msg) => void warnings.push(msg) };
    const evicting = createRedis(srv.url, 'evict-test');
    const local = createRedis(REDIS_URL, 'evict-test');
    try {
      expect(await checkEvictionPolicy(evicting, log)).toBe('allkeys-lru');
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toMatch(/noeviction/);
      await evicting.config('SET', 'maxmemory-policy', 'noeviction');
      expect(await checkEvictionPolicy(evicting, log)).toBe('noeviction');
      expect(warnings).toHaveLength(1);
    } finally {
      evicting.disconnect();
      local.disconnect();
      await srv.stop();
    }
  });
});

describe('queue layout', () => {
  it('refuses queue data of the layout before the due buckets, pending or not, and passes the current one', async () => {
    const redis = createRedis(REDIS_URL, 'layout-test');
    const names = [uniqueQueueName('layout-a'), uniqueQueueName('layout-b')];
    const [a, b] = names.map((name) => createQueue(redis, { name, types: { t: {} } })) as [Queue, Queue];
    try {
      await a.schedule({ id: 'new', type: 't', delayMs: 60_000 });
      await b.schedule({ id: 'new', type: 't', delayMs: 60_000 });
      await checkQueueLayout(redis, [a, b]);
      // Old pending job: the single due ZSET.
      await redis.zadd(`dq:{${names[0]}:0}:due`, Date.now(), 'old');
      await expect(checkQueueLayout(redis, [a, b])).rejects.toThrow(new RegExp(`dq:\\{${names[0]}:0\\}[^,]*; this build cannot read it`));
      await redis.del(`dq:{${names[0]}:0}:due`);
      // Old dead job: only its record ("gen,attempts,maxAttempts,type,payload") tells.
      await b.cancel('new');
      await redis.hset(b.keys[0]!.jobs, 'old', '0,3,,t,{}');
      await expect(checkQueueLayout(redis, [a, b])).rejects.toBeInstanceOf(QueueLayoutError);
    } finally {
      for (const n of names) await dropQueue(redis, n);
      redis.disconnect();
    }
  });
});

describe('http errors', () => {
  const redis = createRedis(REDIS_URL, 'app-test');
  const app = createApp({ log: createLogger('silent'), redis });
  afterAll(() => redis.disconnect());

  it('sends security headers on every answer, no CORS headers, and a docs page without inline script', async () => {
    for (const res of [await request(app).get('/healthz'), await request(app).get('/nope'), await request(app).get('/docs')]) {
      expect(res.headers['x-content-type-options']).toBe('nosniff');
      expect(res.headers['x-frame-options']).toBe('SAMEORIGIN');
      expect(res.headers['x-powered-by']).toBeUndefined();
      expect(res.headers['content-security-policy']).toMatch(/script-src 'self'(;|$)/);
      expect(res.headers['content-security-policy']).not.toContain('upgrade-insecure-requests');
      expect(res.headers['access-control-allow-origin']).toBeUndefined();
    }
    const preflight = await request(app).options('/orders').set('origin', 'https://evil.example').set('access-control-request-method', 'POST');
    expect(preflight.headers['access-control-allow-origin']).toBeUndefined();
    const page = await request(app).get('/docs');
    expect(page.text).not.toMatch(/<script>/);
    const init = await request(app).get('/docs/swagger-init.js');
    expect(init.status).toBe(200);
    expect(init.text).toContain('SwaggerUIBundle');
  });

  it('answers CORS only for the configured origins (CORS_ORIGINS), preflights included', async () => {
    const shop = 'https://shop.example.com';
    const open = createApp({ log: createLogger('silent'), redis, corsOrigins: [shop] });
    const allowed = await request(open).get('/healthz').set('origin', shop);
    expect(allowed.headers['access-control-allow-origin']).toBe(shop);
    expect(allowed.headers.vary).toMatch(/Origin/);
    const preflight = await request(open).options('/orders').set('origin', shop).set('access-control-request-method', 'POST');
    expect(preflight.status).toBe(204);
    expect(preflight.headers['access-control-allow-headers']).toMatch(/Authorization/);
    expect(preflight.headers['access-control-allow-headers']).toMatch(/Idempotency-Key/);
    const stranger = await request(open).options('/orders').set('origin', 'https://evil.example').set('access-control-request-method', 'POST');
    expect(stranger.headers['access-control-allow-origin']).toBeUndefined();
    expect(() => loadConfig({ CORS_ORIGINS: 'shop.example.com' })).toThrow(/CORS_ORIGINS/);
    expect(loadConfig({ CORS_ORIGINS: `${shop}, http://localhost:5173` }).CORS_ORIGINS).toEqual([shop, 'http://localhost:5173']);
  });

  it('answers an unknown route with a 404 problem', async () => {
    const res = await request(app).get('/nope');
    expect(res.status).toBe(404);
    expect(res.headers['content-type']).toMatch(/application\/problem\+json/);
    expect(res.body).toMatchObject({ status: 404, code: 'NOT_FOUND' });
  });

  it('reads no body for a route that takes none: malformed or oversized JSON to an unknown route is its 404', async () => {
    // (A route's own body errors: orders.api.test.ts; a body before its key: auth.api.test.ts.)
    const bad = await request(app).post('/anything').set('content-type', 'application/json').send('{"a":');
    expect(bad.status).toBe(404);
    const big = await request(app)
      .post('/anything')
      .set('content-type', 'application/json')
      .send(JSON.stringify({ a: 'x'.repeat(70_000) }));
    expect(big.status).toBe(404);
    expect(big.body.code).toBe('NOT_FOUND');
  });

  it('reports readiness', async () => {
    const res = await request(app).get('/readyz');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: 'ready' });
  });
});

describe('stats subcommand', () => {
  it('prints the queue table', async () => {
    const p = runMain(['stats'], { REDIS_URL, QUEUE_PREFIX: 'stats-test' });
    expect(await p.exited).toBe(0);
    const out = p.output();
    expect(out).toMatch(/queue\s+shard\s+pending\s+due now\s+in flight\s+dead/);
    for (const q of ['orders', 'appointments', 'notifications', 'parcels']) expect(out).toMatch(new RegExp(`\\n${q}\\s+all\\s+0\\s+0\\s+0\\s+0`));
  });
});
