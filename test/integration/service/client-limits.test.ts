// The per-client limits: every key of a client shares the client's request
// rate (another client is not slowed), and a client reminds at most its
// hourly number of distinct contacts (a contact already in its hour comes in
// again; another client's contacts are its own). Each limit has its own
// service, so one test's spending cannot refuse the other's requests.
import { randomBytes } from 'node:crypto';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedis } from '../../../src/core/redis.js';
import { distinctLimit } from '../../../src/core/rate-limit.js';
import { appointmentBody } from '../../helpers/bodies.js';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { dropPrefix, REDIS_URL } from '../../helpers/redis.js';
import { bearer, makeApiKey, startTestService, type TestService } from '../../helpers/service.js';

let tdb: TestDb;
beforeAll(async () => {
  tdb = await createTestDb('client_limits');
});
afterAll(async () => {
  await tdb?.drop();
});

const unique = () => randomBytes(3).toString('hex');

describe('requests a second per client', () => {
  let svc: TestService;
  beforeAll(async () => {
    svc = await startTestService(tdb.url, { API_RATE_LIMIT_PER_SECOND: '1000', CLIENT_RATE_LIMIT_PER_SECOND: '3' }, 'api');
  });
  afterAll(() => svc?.stop());

  it("a client's keys share its rate; another client is not slowed", async () => {
    const busy = `busy-${unique()}`;
    const one = await makeApiKey(tdb.url, ['orders:read'], 'one', busy);
    const two = await makeApiKey(tdb.url, ['orders:read'], 'two', busy);
    const calm = await makeApiKey(tdb.url, ['orders:read'], 'calm', `calm-${unique()}`);
    const read = (key: string) => request(svc.url).get('/orders/00000000-0000-4000-8000-000000000000').set(bearer(key));
    // 3 a second with bursts of 3 for the client, 1 000 for each key: of 12 sent at once over both keys, most are refused by the client's limit.
    const answers = await Promise.all(Array.from({ length: 12 }, (_, i) => read(i % 2 ? one.key : two.key)));
    const refused = answers.filter((r) => r.status === 429);
    expect(refused.length).toBeGreaterThanOrEqual(6);
    expect(answers.filter((r) => r.status === 404).length).toBeGreaterThanOrEqual(3);
    expect(refused[0]?.body).toMatchObject({ code: 'RATE_LIMITED', title: "Too many requests for this API key's client" });
    expect(Number(refused[0]?.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    // Both keys were refused, not only one of them.
    expect(new Set(answers.flatMap((r, i) => (r.status === 429 ? [i % 2] : []))).size).toBe(2);
    expect((await read(calm.key)).status).toBe(404);
  });
});

describe('distinct reminder contacts an hour per client', () => {
  let svc: TestService;
  beforeAll(async () => {
    svc = await startTestService(tdb.url, { CLIENT_CONTACTS_PER_HOUR: '2' }, 'api');
  });
  afterAll(() => svc?.stop());

  const count = async (client: string) => {
    const [row] = await tdb.db.$queryRaw<{ a: number; n: number }[]>`
      SELECT (SELECT count(*)::int FROM appointments WHERE client = ${client}) AS a,
             (SELECT count(*)::int FROM notifications WHERE client = ${client}) AS n`;
    return row;
  };

  it('refuses a new contact past the limit, nothing written; a contact in the hour and another client go on', async () => {
    const spender = `spender-${unique()}`;
    const other = `other-${unique()}`;
    const key = await makeApiKey(tdb.url, ['appointments:write'], 'spender', spender);
    const otherKey = await makeApiKey(tdb.url, ['appointments:write'], 'other', other);
    const book = (k: string, contact: string) => request(svc.url).post('/appointments').set(bearer(k)).send(appointmentBody({ contact }));
    const tag = unique();
    expect((await book(key.key, `a-${tag}@example.com`)).status).toBe(201);
    expect((await book(key.key, `b-${tag}@example.com`)).status).toBe(201);
    const before = await count(spender);
    const third = await book(key.key, `c-${tag}@example.com`);
    expect(third.status).toBe(429);
    expect(third.body.code).toBe('CLIENT_CONTACTS_LIMITED');
    expect(third.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(Number(third.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(await count(spender)).toEqual(before);
    // Respelled, the first contact is the same contact: still in the hour.
    expect((await book(key.key, `A-${tag}@Example.com`)).status).toBe(201);
    // Another client has its own hour.
    expect((await book(otherKey.key, `c-${tag}@example.com`)).status).toBe(201);
  });
});

describe('the distinct-members window in Redis', () => {
  const redis = createRedis(REDIS_URL, 'distinct-limit-test');
  const prefix = `dl${unique()}`;
  afterAll(async () => {
    await dropPrefix(redis, prefix);
    redis.disconnect();
  });

  it('admits members below the limit and again while they are in the window; a new one waits for the oldest to leave', async () => {
    await redis.ping();
    const limit = distinctLimit(redis, prefix, 'contacts', 2, 300);
    expect(await limit.admit('a', 'x')).toEqual({ ok: true });
    expect(await limit.admit('a', 'y')).toEqual({ ok: true });
    const refused = await limit.admit('a', 'z');
    expect(refused.ok).toBe(false);
    expect(!refused.ok && refused.retryAfterMs).toBeGreaterThan(0);
    expect(!refused.ok && refused.retryAfterMs).toBeLessThanOrEqual(300);
    expect(await limit.admit('a', 'x')).toEqual({ ok: true });
    // Another key has its own window.
    expect(await limit.admit('b', 'z')).toEqual({ ok: true });
    // Once the window has passed, the old members are gone.
    await new Promise((r) => setTimeout(r, 350));
    expect(await limit.admit('a', 'z')).toEqual({ ok: true });
    expect(await redis.zcard(`${prefix}:rld:contacts:a`)).toBe(1);
  });
});
