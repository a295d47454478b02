// Closed to strangers: every route the OpenAPI document lists is walked with no
// key, a malformed key, a wrong key, a revoked key, the admin token and a key
// lacking its scope, and nothing is written for any refused request; the
// operators' key routes (secrets shown once, never listed; revocation seen by
// a second instance within a second); idempotency keys scoped per client;
// the per-key rate limit, the failed-authentication brake and the per-contact
// reminder limit, each with 429 and Retry-After.
import { randomBytes } from 'node:crypto';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KEY_PATTERN } from '../../../src/core/auth/api-keys.js';
import { SCOPES, type Scope } from '../../../src/core/auth/scopes.js';
import type { RedisClient } from '../../../src/core/redis.js';
import { batcherPrefix, masters } from '../../../src/queue/index.js';
import { appointmentBody, orderBody } from '../../helpers/bodies.js';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { redisClient, sleep } from '../../helpers/redis.js';
import { startTcpProxy } from '../../helpers/tcp-proxy.js';
import { bearer, makeApiKey, startTestService, stopTestService, type TestService } from '../../helpers/service.js';
import { allRecords } from '../../helpers/records.js';

const TOKEN = 'auth-test-admin-token-0123456789';
let tdb: TestDb;
let svc: TestService;
let redis: RedisClient;

beforeAll(async () => {
  tdb = await createTestDb('auth');
  // The walk below fails authentication hundreds of times from one address: no brake here (its own test has one).
  svc = await startTestService(tdb.url, { ADMIN_TOKEN: TOKEN, AUTH_FAILURES_PER_MINUTE: '100000' });
  redis = redisClient('auth-test');
});
afterAll(async () => {
  redis.disconnect();
  await stopTestService(svc, tdb);
});

type Operation = { security: Record<string, string[]>[]; requestBody?: unknown };
type Walked = { method: string; path: string; op: Operation };

async function operations(): Promise<Walked[]> {
  const doc = (await request(svc.url).get('/openapi.json')).body as { paths: Record<string, Record<string, Operation>> };
  return Object.entries(doc.paths).flatMap(([path, ops]) => Object.entries(ops).map(([method, op]) => ({ method, path, op })));
}

/** A request to a documented path, its parameters filled in (the guard answers before they are read). */
function call(w: Walked, headers: Record<string, string> = {}) {
  const path = w.path.replace(/\{[^}]+\}/g, '00000000-0000-4000-8000-000000000000');
  const r = request(svc.url)[w.method as 'get' | 'post' | 'put' | 'patch' | 'delete'](path).set(headers);
  return w.op.requestBody ? r.send({}) : r;
}

const TABLES = ['orders', 'order_items', 'appointments', 'areas', 'parcels', 'batches', 'notifications', 'api_keys'];

async function rows(): Promise<string[]> {
  return Promise.all(
    TABLES.map(async (t) => {
      const [row] = await tdb.db.$queryRawUnsafe<{ n: number }[]>(`SELECT count(*)::int AS n FROM ${t}`);
      return `${t}=${row?.n}`;
    }),
  );
}

/** Rows per table, the jobs the service's queues hold (its periodic ones aside) and its parcel batcher's keys. */
async function written(): Promise<string> {
  const counts = await rows();
  const periodic = new Set(svc.modules.flatMap((m) => m.periodic.map((p) => p.id)));
  const jobs: string[] = [];
  for (const m of svc.modules) for (const k of m.queue.keys) jobs.push(...Object.keys(await allRecords(redis, k)).filter((id) => !periodic.has(id)));
  let batcherKeys = 0;
  for (const node of masters(redis)) {
    for await (const batch of node.scanStream({ match: `${batcherPrefix(svc.prefix)}:*`, count: 1000 }) as AsyncIterable<string[]>) batcherKeys += batch.length;
  }
  return [...counts, `jobs=${jobs.sort().join(',')}`, `batcher=${batcherKeys}`].join(' ');
}

const forged = () => `ots_${randomBytes(16).toString('hex')}_${randomBytes(32).toString('base64url')}`;

describe('every route of the document', () => {
  it('needs a valid key holding its scope, or the admin token for /admin, and writes nothing when refused', async () => {
    const walked = await operations();
    const scoped = walked.filter((w) => w.op.security.some((s) => s.apiKey));
    const admin = walked.filter((w) => w.op.security.some((s) => s.adminToken));
    const open = walked.filter((w) => w.op.security.length === 0);
    expect(scoped.length).toBeGreaterThan(10);
    expect(admin.length).toBeGreaterThan(10);
    expect(open.map((w) => w.path).sort()).toEqual(
      [
        '/admin/dashboard',
        '/admin/dashboard/{asset}',
        '/docs',
        '/docs/swagger-init.js',
        '/docs/{asset}',
        '/healthz',
        '/metrics',
        '/openapi.json',
        '/readyz',
      ].sort(),
    );

    const revoked = await makeApiKey(tdb.url, SCOPES, 'to revoke');
    expect((await request(svc.url).delete(`/admin/api-keys/${revoked.id}`).set(bearer(TOKEN))).status).toBe(200);
    const allBut = new Map<Scope, string>();
    for (const s of SCOPES)
      allBut.set(
        s,
        (
          await makeApiKey(
            tdb.url,
            SCOPES.filter((x) => x !== s),
            `all but ${s}`,
          )
        ).key,
      );

    const before = await written();
    for (const w of scoped) {
      const scope = w.op.security.find((s) => s.apiKey)?.apiKey?.[0] as Scope;
      const what = `${w.method} ${w.path}`;
      for (const headers of [
        {},
        { authorization: 'Bearer nope' },
        { authorization: `Basic ${svc.key}` },
        bearer(forged()),
        bearer(revoked.key),
        bearer(TOKEN),
      ]) {
        const res = await call(w, headers);
        expect(res.status, `${what} ${JSON.stringify(headers)}`).toBe(401);
        expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
        expect(res.headers['www-authenticate']).toBe('Bearer');
        expect(res.body.code).toBe('UNAUTHORIZED');
      }
      const lacking = await call(w, bearer(allBut.get(scope) as string));
      expect(lacking.status, what).toBe(403);
      expect(lacking.body).toMatchObject({ code: 'INSUFFICIENT_SCOPE', scope });
      expect(lacking.body.detail).toContain(scope);
      expect(lacking.headers['www-authenticate']).toContain(`scope="${scope}"`);
      // The key with every scope gets past the guard (to whatever the empty input then earns).
      expect([401, 403, 429], what).not.toContain((await call(w, bearer(svc.key))).status);
    }
    // The body of a stranger is never read: malformed or oversized JSON without a key is still 401.
    const strangerBodies = [
      await request(svc.url).post('/orders').set('content-type', 'application/json').send('{"customerId":'),
      await request(svc.url)
        .post('/orders')
        .set('content-type', 'application/json')
        .send(JSON.stringify({ a: 'x'.repeat(70_000) })),
    ];
    expect(strangerBodies.map((r) => r.status)).toEqual([401, 401]);
    for (const w of admin) {
      const what = `${w.method} ${w.path}`;
      expect((await call(w)).status, what).toBe(401);
      expect((await call(w, bearer(svc.key))).status, `${what}: an API key never opens /admin`).toBe(401);
    }
    for (const w of open) expect((await call(w)).status, `${w.method} ${w.path}`).not.toBe(401);
    // The key-holding calls above were refused by their input checks (ids that exist nowhere, empty bodies).
    expect(await written()).toBe(before);
  });
});

describe('the operators’ API keys', () => {
  const admin = () => request(svc.url);
  it('are made with their secret shown once, listed without secrets, and revoked', async () => {
    const made = await admin()
      .post('/admin/api-keys')
      .set(bearer(TOKEN))
      .send({ name: 'checkout', scopes: ['orders:write', 'orders:read', 'orders:read'] });
    expect(made.status).toBe(201);
    expect(made.headers['cache-control']).toBe('no-store');
    expect(made.body).toMatchObject({ name: 'checkout', client: 'default', scopes: ['orders:write', 'orders:read'] });
    expect(made.body.key).toMatch(KEY_PATTERN);
    expect(made.body.key.replace(/_/g, '')).toContain(made.body.id.replaceAll('-', ''));

    const list = await admin().get('/admin/api-keys').set(bearer(TOKEN));
    expect(list.status).toBe(200);
    const mine = list.body.keys.find((k: { id: string }) => k.id === made.body.id);
    expect(mine).toMatchObject({ name: 'checkout', revokedAt: null, lastUsedAt: null });
    expect(JSON.stringify(list.body)).not.toContain(made.body.key.slice(-43));
    expect(JSON.stringify(list.body)).not.toMatch(/ots_|secret|hash/i);
    const [stored] = await tdb.db.$queryRawUnsafe<{ secret_hash: string }[]>(`SELECT secret_hash FROM api_keys WHERE id = '${made.body.id}'`);
    expect(stored?.secret_hash).toMatch(/^[0-9a-f]{64}$/);
    expect(stored?.secret_hash).not.toContain(made.body.key.slice(-43));

    const use = await request(svc.url).post('/orders').set(bearer(made.body.key)).send(orderBody());
    expect(use.status).toBe(201);
    const used = await admin().get('/admin/api-keys').set(bearer(TOKEN));
    expect(used.body.keys.find((k: { id: string }) => k.id === made.body.id).lastUsedAt).toMatch(/^\d{4}-/);

    const gone = await admin().delete(`/admin/api-keys/${made.body.id}`).set(bearer(TOKEN));
    expect(gone.status).toBe(200);
    expect(gone.body.revokedAt).toMatch(/^\d{4}-/);
    const again = await admin().delete(`/admin/api-keys/${made.body.id}`).set(bearer(TOKEN));
    expect(again.body.revokedAt).toBe(gone.body.revokedAt);
    expect((await admin().delete('/admin/api-keys/00000000-0000-4000-8000-000000000000').set(bearer(TOKEN))).status).toBe(404);
    expect((await admin().delete('/admin/api-keys/nope').set(bearer(TOKEN))).body.code).toBe('INVALID_API_KEY_ID');
  });

  it('belong to the client they are made for; the list shows one client with ?client=', async () => {
    const shop = `shop-${randomBytes(3).toString('hex')}`;
    const made = await admin()
      .post('/admin/api-keys')
      .set(bearer(TOKEN))
      .send({ name: 'till', scopes: ['orders:read'], client: shop });
    expect(made.status).toBe(201);
    expect(made.body).toMatchObject({ name: 'till', client: shop });
    const mine = await admin().get(`/admin/api-keys?client=${shop}`).set(bearer(TOKEN));
    expect(mine.body.keys.map((k: { id: string; client: string }) => [k.id, k.client])).toEqual([[made.body.id, shop]]);
    const all = await admin().get('/admin/api-keys').set(bearer(TOKEN));
    expect(all.body.keys.length).toBeGreaterThan(1);
    expect(new Set(all.body.keys.map((k: { client: string }) => k.client))).toContain('default');
    expect((await admin().get('/admin/api-keys?client=no%20such').set(bearer(TOKEN))).status).toBe(400);
  });

  it('refuses a bad key request with 400 and makes nothing', async () => {
    const before = await written();
    for (const body of [
      {},
      { name: '', scopes: ['orders:read'] },
      { name: 'x'.repeat(65), scopes: ['orders:read'] },
      { name: 'x', scopes: [] },
      { name: 'x', scopes: ['orders:everything'] },
      { name: 'x', scopes: 'orders:read' },
      { name: 'x', scopes: ['orders:read'], key: 'ots_mine' },
      { name: 'x', scopes: ['orders:read'], client: '' },
      { name: 'x', scopes: ['orders:read'], client: 'a/b' },
      { name: 'x', scopes: ['orders:read'], client: 'x'.repeat(65) },
    ]) {
      const res = await admin().post('/admin/api-keys').set(bearer(TOKEN)).send(body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.code).toBe('VALIDATION_FAILED');
    }
    expect(
      (
        await admin()
          .post('/admin/api-keys')
          .send({ name: 'x', scopes: ['orders:read'] })
      ).status,
    ).toBe(401);
    expect(await written()).toBe(before);
  });

  it('a revocation holds on another instance within a second', async () => {
    const other = await startTestService(tdb.url, { ADMIN_TOKEN: TOKEN }, 'api');
    try {
      const made = await admin()
        .post('/admin/api-keys')
        .set(bearer(TOKEN))
        .send({ name: 'two instances', scopes: ['orders:read'] });
      const read = (s: TestService) => request(s.url).get('/orders/00000000-0000-4000-8000-000000000000').set(bearer(made.body.key));
      // Both instances know the key (and remember it).
      expect((await read(svc)).status).toBe(404);
      expect((await read(other)).status).toBe(404);
      expect((await admin().delete(`/admin/api-keys/${made.body.id}`).set(bearer(TOKEN))).status).toBe(200);
      await sleep(1_000);
      expect((await read(other)).status).toBe(401);
      expect((await read(svc)).status).toBe(401);
    } finally {
      await other.stop();
    }
  });
});

describe('a revocation during a slow key lookup', () => {
  it('still holds within a second: a verdict counts from its lookup’s start, and no request joins a lookup older than that', async () => {
    const proxy = await startTcpProxy({ port: Number(new URL(tdb.url).port || 5432) });
    const through = new URL(tdb.url);
    through.port = String(proxy.port);
    const slow = await startTestService(through.toString(), {}, 'api');
    try {
      const k = await makeApiKey(tdb.url, ['orders:read'], 'slow lookups');
      const read = () => request(slow.url).get('/orders/00000000-0000-4000-8000-000000000000').set(bearer(k.key));
      expect((await read()).status).toBe(404);
      await sleep(600); // its verdict no longer believed
      proxy.delay(1_200, 'answers'); // PostgreSQL reads at once, its answers come late
      const before = read().then((r) => r); // sent now (supertest sends on then): a lookup starts, reading the key before the revocation below
      await sleep(100);
      await tdb.db.$executeRawUnsafe(`UPDATE api_keys SET revoked_at = now() WHERE id = '${k.id}'`);
      await sleep(1_000);
      // That lookup is still running; this request must not take its verdict.
      expect((await read()).status).toBe(401);
      expect((await before).status).toBe(404); // sent before the revocation
    } finally {
      proxy.delay(0);
      await slow.stop();
      await proxy.close();
    }
  }, 60_000);
});

describe('idempotency keys', () => {
  it('belong to the client that sent them: the same key from two clients makes two orders', async () => {
    const a = await makeApiKey(tdb.url, ['orders:write'], 'client a', 'idem-a');
    const b = await makeApiKey(tdb.url, ['orders:write'], 'client b', 'idem-b');
    const idem = `shared-${randomBytes(4).toString('hex')}`;
    const create = (key: string, body: Record<string, unknown>) => request(svc.url).post('/orders').set(bearer(key)).set('Idempotency-Key', idem).send(body);
    const body = orderBody({ customerId: 'same' });
    const first = await create(a.key, body);
    const second = await create(b.key, body);
    expect(first.status).toBe(201);
    expect(second.status).toBe(201);
    expect(second.body.id).not.toBe(first.body.id);
    expect(second.headers['idempotent-replayed']).toBeUndefined();
    // Each replays its own, and another body under the same key is each one's own reuse.
    const replayA = await create(a.key, body);
    expect(replayA.body.id).toBe(first.body.id);
    expect(replayA.headers['idempotent-replayed']).toBe('true');
    expect((await create(b.key, body)).body.id).toBe(second.body.id);
    expect((await create(b.key, orderBody({ customerId: 'other' }))).status).toBe(422);
  });

  it("are shared by a client's keys: a retry sent with a new key of the same client replays", async () => {
    const old = await makeApiKey(tdb.url, ['orders:write'], 'before rotation', 'idem-c');
    const rotated = await makeApiKey(tdb.url, ['orders:write'], 'after rotation', 'idem-c');
    const idem = `rotated-${randomBytes(4).toString('hex')}`;
    const create = (key: string) => request(svc.url).post('/orders').set(bearer(key)).set('Idempotency-Key', idem).send(orderBody());
    const first = await create(old.key);
    expect(first.status).toBe(201);
    const retry = await create(rotated.key);
    expect(retry.status).toBe(201);
    expect(retry.body.id).toBe(first.body.id);
    expect(retry.headers['idempotent-replayed']).toBe('true');
  });
});

describe('abuse limits', () => {
  let limited: TestService;
  beforeAll(async () => {
    limited = await startTestService(tdb.url, { API_RATE_LIMIT_PER_SECOND: '3', AUTH_FAILURES_PER_MINUTE: '3', REMINDERS_PER_CONTACT_PER_HOUR: '2' }, 'api');
  });
  afterAll(() => limited?.stop());

  it('a key past its rate gets 429 with Retry-After; another key is not slowed', async () => {
    const busy = await makeApiKey(tdb.url, ['orders:read'], 'busy');
    const quiet = await makeApiKey(tdb.url, ['orders:read'], 'quiet');
    const read = (key: string) => request(limited.url).get('/orders/00000000-0000-4000-8000-000000000000').set(bearer(key));
    // 3 a second with bursts of 3: of 12 sent at once, most are refused whatever the machine's speed.
    const answers = await Promise.all(Array.from({ length: 12 }, () => read(busy.key)));
    const refused = answers.filter((r) => r.status === 429);
    expect(refused.length).toBeGreaterThanOrEqual(6);
    expect(answers.filter((r) => r.status === 404).length).toBeGreaterThanOrEqual(3);
    expect(refused[0]?.body.code).toBe('RATE_LIMITED');
    expect(refused[0]?.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(Number(refused[0]?.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect((await read(quiet.key)).status).toBe(404);
  });

  it("a contact gets at most its hourly number of reminders booked or moved by one client, whichever of its keys asks; another client's count is its own", async () => {
    const contact = `limit-${randomBytes(3).toString('hex')}@example.com`;
    const one = await makeApiKey(tdb.url, ['appointments:write'], 'booking one');
    const two = await makeApiKey(tdb.url, ['appointments:write'], 'booking two');
    const book = (key: string) => request(limited.url).post('/appointments').set(bearer(key)).send(appointmentBody({ contact }));
    const first = await book(one.key);
    expect(first.status).toBe(201);
    expect((await book(two.key)).status).toBe(201);
    const before = await rows(); // (another service's queues: only the database is compared)
    const third = await book(one.key);
    expect(third.status).toBe(429);
    expect(third.body.code).toBe('CONTACT_RATE_LIMITED');
    expect(Number(third.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    const move = await request(limited.url)
      .patch(`/appointments/${first.body.id}`)
      .set(bearer(two.key))
      .send({ startsAt: new Date(Date.now() + 7_200_000).toISOString() });
    expect(move.status).toBe(429);
    expect(await rows()).toEqual(before);
    // Another client reminding the same person has its own count (none can use up, or read, another's).
    const elsewhere = await makeApiKey(tdb.url, ['appointments:write'], 'another clinic', 'another-clinic');
    expect((await book(elsewhere.key)).status).toBe(201);
    // Another contact is not held back.
    const other = await request(limited.url)
      .post('/appointments')
      .set(bearer(one.key))
      .send(appointmentBody({ contact: `${contact}.other` }));
    expect(other.status).toBe(201);
  });

  // Last: it leaves this address braked for keys the service does not know yet.
  it('an address failing to authenticate is braked: 429 instead of more lookups, but not for keys seen valid, nor for requests without a key', async () => {
    const order = (headers: Record<string, string>) => request(limited.url).get('/orders/00000000-0000-4000-8000-000000000000').set(headers);
    const known = await makeApiKey(tdb.url, ['orders:read'], 'known');
    expect((await order(bearer(known.key))).status).toBe(404);
    // Requests without a key, or with something that is no key, cost no lookup and are not counted.
    for (let i = 0; i < 10; i++) expect((await order(i % 2 ? {} : { authorization: 'Bearer nope' })).status).toBe(401);
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) statuses.push((await order(bearer(forged()))).status);
    expect(statuses.slice(0, 3)).toEqual([401, 401, 401]);
    expect(statuses.slice(3)).toEqual([429, 429, 429]);
    const braked = await order(bearer(forged()));
    expect(braked.body.code).toBe('TOO_MANY_AUTH_FAILURES');
    expect(Number(braked.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    // A key this instance has seen valid still gets in (its cached verdict long expired).
    await sleep(600);
    expect((await order(bearer(known.key))).status).toBe(404);
    // A key it has not seen waits with the rest of the address.
    const unseen = await makeApiKey(tdb.url, ['orders:read'], 'unseen');
    expect((await order(bearer(unseen.key))).status).toBe(429);
  });
});
