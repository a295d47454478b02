// The public routes cannot hurt the private ones, and every request is judged
// before any work: a burst of anonymous scrapes costs at most one metrics
// collection a second while a client's request is still answered; the public
// routes are limited per address (429 with Retry-After); /metrics on its own
// listener and behind its token; wrong admin tokens count in the per-address
// brake the API keys use; a wrong method is 405 with Allow, a body that is not
// JSON 415, and answers behind a credential are never stored by a cache.
import { randomBytes } from 'node:crypto';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../../src/core/free-port.js';
import { appointmentBody, orderBody } from '../../helpers/bodies.js';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { parseExposition, valueOf } from '../../helpers/prometheus.js';
import { sleep } from '../../helpers/redis.js';
import { bearer, makeApiKey, startTestService, stopTestService, type TestService } from '../../helpers/service.js';

const ADMIN = `public-routes-admin-${randomBytes(8).toString('hex')}`;
const METRICS = `public-routes-metrics-${randomBytes(8).toString('hex')}`;
const NO_ORDER = '/orders/00000000-0000-4000-8000-000000000000';

let tdb: TestDb;
/** No public limit to speak of: the scrape burst must reach the metrics route. */
let svc: TestService;
/** A low public limit, /metrics on its own port behind a token. */
let guarded: TestService;
let metricsPort: number;

// These services check the limits, not load shedding: a busy CI host must not turn their answers into 503s.
const NO_SHEDDING = { API_SHED_EVENT_LOOP_DELAY_MS: '0' };

beforeAll(async () => {
  tdb = await createTestDb('public_routes');
  svc = await startTestService(tdb.url, { ...NO_SHEDDING, ADMIN_TOKEN: ADMIN, PUBLIC_RATE_LIMIT_PER_SECOND: '1000000' });
  metricsPort = await freePort();
  guarded = await startTestService(
    tdb.url,
    { ...NO_SHEDDING, ADMIN_TOKEN: ADMIN, PUBLIC_RATE_LIMIT_PER_SECOND: '5', METRICS_PORT: String(metricsPort), METRICS_TOKEN: METRICS },
    'api',
  );
}, 60_000);
afterAll(async () => {
  await guarded?.stop();
  await stopTestService(svc, tdb);
});

const collections = (text: string) => valueOf(parseExposition(text), 'ots_metrics_collections_total', {});
const orderCount = async () => (await tdb.db.$queryRawUnsafe<{ n: number }[]>('SELECT count(*)::int AS n FROM orders'))[0]?.n;

describe('a burst of anonymous scrapes', () => {
  it('runs at most one collection a second, shared by the burst, while a client is answered', async () => {
    const before = collections((await request(svc.url).get('/metrics')).text);
    const started = performance.now();
    const scrapes = Array.from({ length: 100 }, () =>
      request(svc.url)
        .get('/metrics')
        .then((r) => r),
    );
    const client = await svc.api().get(NO_ORDER);
    const answers = await Promise.all(scrapes);
    const seconds = (performance.now() - started) / 1_000;

    expect(client.status).toBe(404); // answered (the order does not exist)
    expect(answers.map((r) => r.status)).toEqual(answers.map(() => 200));
    // Each collection counts itself in the text it makes, and every collection is served to a scrape.
    const ran = Math.max(...answers.map((r) => collections(r.text))) - before;
    expect(ran).toBeLessThanOrEqual(Math.ceil(seconds) + 1);
    expect(ran).toBeLessThan(answers.length);
  });
});

describe('a wrong method', () => {
  it('on a path the API serves is 405 with Allow, before the key is read and before any work', async () => {
    const before = await orderCount();
    for (const [method, path, allow] of [
      ['put', '/orders', 'POST'],
      ['delete', NO_ORDER, 'GET, HEAD, PATCH'],
      ['get', `${NO_ORDER}/pay`, 'POST'],
      ['post', '/healthz', 'GET, HEAD'],
      ['delete', '/openapi.json', 'GET, HEAD'],
      ['put', '/appointments/00000000-0000-4000-8000-000000000000', 'GET, HEAD, PATCH'],
    ] as const) {
      for (const r of [request(svc.url)[method](path), svc.api()[method](path).send(orderBody())]) {
        const res = await r;
        expect(res.status, `${method} ${path}`).toBe(405);
        expect(res.headers.allow).toBe(allow);
        expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
        expect(res.body.code).toBe('METHOD_NOT_ALLOWED');
      }
    }
    expect(await orderCount()).toBe(before);
    expect((await request(svc.url).put('/no-such-path')).status).toBe(404);
  });

  it('under /admin is 401 without the token and 405 with it', async () => {
    expect((await request(svc.url).put('/admin/queues')).status).toBe(401);
    const res = await request(svc.url).put('/admin/queues').set(bearer(ADMIN));
    expect(res.status).toBe(405);
    expect(res.headers.allow).toBe('GET, HEAD');
  });
});

describe('a body that is not JSON', () => {
  it('is 415 on a route that takes a body, after the key and before anything is read or written', async () => {
    const before = await orderCount();
    const json = JSON.stringify(orderBody());
    for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'application/xml']) {
      const res = await svc.api().post('/orders').set('content-type', type).send(json);
      expect(res.status, type).toBe(415);
      expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(res.body.code).toBe('UNSUPPORTED_MEDIA_TYPE');
    }
    // A stranger learns nothing new: the key is checked first.
    expect((await request(svc.url).post('/orders').set('content-type', 'text/plain').send(json)).status).toBe(401);
    expect(await orderCount()).toBe(before);
    // JSON with a charset is JSON; an optional body may be left out whatever the Content-Type says.
    expect((await svc.api().post('/orders').set('content-type', 'application/json; charset=utf-8').send(json)).status).toBe(201);
    expect((await svc.api().post(`${NO_ORDER}/pay`).set('content-type', 'text/plain')).status).toBe(404);
  });
});

describe('answers behind a credential', () => {
  it('carry Cache-Control: no-store (contacts, recipients, keys); public ones do not', async () => {
    const booked = await svc.api().post('/appointments').send(appointmentBody());
    expect(booked.status).toBe(201);
    for (const path of [`/appointments/${booked.body.id}`, NO_ORDER, `/notifications?appointmentId=${booked.body.id}`]) {
      expect((await svc.api().get(path)).headers['cache-control'], path).toBe('no-store');
    }
    expect((await request(svc.url).get(NO_ORDER)).headers['cache-control']).toBe('no-store'); // the 401 too
    expect((await request(svc.url).get('/admin/api-keys').set(bearer(ADMIN))).headers['cache-control']).toBe('no-store');
    expect((await request(svc.url).get('/healthz')).headers['cache-control']).toBeUndefined();
  });
});

describe('the public routes', () => {
  it('are limited per address: 429 RATE_LIMITED with Retry-After; a client’s key routes are not', async () => {
    await sleep(1_100); // the bucket full again (5 a second, bursts of 5)
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => request(guarded.url).get(i % 2 ? '/healthz' : '/openapi.json')));
    const refused = answers.filter((r) => r.status === 429);
    expect(answers.filter((r) => r.status === 200).length).toBeGreaterThanOrEqual(1);
    expect(refused.length).toBeGreaterThanOrEqual(10);
    expect(refused[0]?.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(refused[0]?.body.code).toBe('RATE_LIMITED');
    expect(Number(refused[0]?.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect((await request(guarded.url).get('/readyz')).status).toBe(429);
    expect((await guarded.api().get(NO_ORDER)).status).toBe(404);
  });

  it('/openapi.json is the same document each time', async () => {
    const [a, b] = [await request(svc.url).get('/openapi.json'), await request(svc.url).get('/openapi.json')];
    expect(a.headers['content-type']).toMatch(/^application\/json/);
    expect(a.text).toBe(b.text);
    expect(a.body.openapi).toBe('3.1.0');
  });
});

describe('/metrics with METRICS_PORT and METRICS_TOKEN', () => {
  const own = () => `http://127.0.0.1:${metricsPort}`;

  it('is served on its own listener only, and there only with the token', async () => {
    await sleep(1_100); // the public bucket full again
    expect((await request(guarded.url).get('/metrics').set(bearer(METRICS))).status).toBe(404);
    const doc = await guarded.api().get('/openapi.json');
    expect(doc.status).toBe(200);
    expect(Object.keys(doc.body.paths)).not.toContain('/metrics');

    const none = await request(own()).get('/metrics');
    expect(none.status).toBe(401);
    expect(none.headers['www-authenticate']).toBe('Bearer');
    expect(none.body).toMatchObject({ code: 'UNAUTHORIZED', title: 'A valid metrics token is required' });
    expect(
      (
        await request(own())
          .get('/metrics')
          .set(bearer(`${METRICS}x`))
      ).status,
    ).toBe(401);
    expect((await request(own()).get('/metrics').set(bearer(ADMIN))).status).toBe(401);
    const ok = await request(own()).get('/metrics').set(bearer(METRICS));
    expect(ok.status).toBe(200);
    expect(ok.text).toMatch(/^ots_metrics_collections_total \d+$/m);

    expect((await request(own()).get('/healthz')).status).toBe(404);
    const wrong = await request(own()).post('/metrics').set(bearer(METRICS));
    expect(wrong.status).toBe(405);
    expect(wrong.headers.allow).toBe('GET, HEAD');
  });
});

// Last: it brakes this address on `svc`.
describe('wrong admin tokens', () => {
  it('count in the per-address brake: 30 failures, then 429 TOO_MANY_AUTH_FAILURES for them and for keys new to the instance', async () => {
    const stranger = await makeApiKey(tdb.url, ['orders:read'], 'new to the instance');
    expect((await request(svc.url).get('/admin/queues').set(bearer(ADMIN))).status).toBe(200); // the operator, seen valid
    const answers = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        request(svc.url)
          .get('/admin/queues')
          .set(bearer(`${ADMIN}-wrong-${i}`)),
      ),
    );
    const unauthorized = answers.filter((r) => r.status === 401).length;
    expect(unauthorized).toBeGreaterThanOrEqual(30);
    expect(unauthorized).toBeLessThanOrEqual(31); // a failure a second leaks back (30 a minute)
    const braked = answers.filter((r) => r.status === 429);
    expect(braked.length + unauthorized).toBe(40);
    expect(braked[0]?.body.code).toBe('TOO_MANY_AUTH_FAILURES');
    expect(Number(braked[0]?.headers['retry-after'])).toBeGreaterThanOrEqual(1);

    expect(
      (
        await request(svc.url)
          .get('/admin/queues')
          .set(bearer(`${ADMIN}-again`))
      ).status,
    ).toBe(429);
    expect((await request(svc.url).get(NO_ORDER).set(bearer(stranger.key))).status).toBe(429);
    // No token at all is refused and not counted; the operator's token, seen valid lately, still passes.
    expect((await request(svc.url).get('/admin/queues')).status).toBe(401);
    expect((await request(svc.url).get('/admin/queues').set(bearer(ADMIN))).status).toBe(200);
  });
});
