// Each client's webhook signing secrets (src/core/client-webhook-secrets.ts and
// their admin routes) against real PostgreSQL: made with the secret shown
// once and never listed, at most the two newest live (concurrent creates
// included), deleted per client; refused without the admin token or with a
// bad client or id, writing nothing; the store's keys newest first, cached
// per client for its cache time, never mixed between clients, so a signature
// made with one client's keys does not verify with another's.
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClientWebhookSecrets } from '../../../src/core/client-webhook-secrets.js';
import { parseWebhookSecrets } from '../../../src/core/webhook-secrets.js';
import { signWebhook } from '../../../src/core/webhook-signature.js';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { sleep } from '../../helpers/redis.js';
import { bearer, startTestService, stopTestService, type TestService } from '../../helpers/service.js';

const TOKEN = 'client-secrets-test-admin-token-0123456789';
let tdb: TestDb;
let svc: TestService;

beforeAll(async () => {
  tdb = await createTestDb('clientsecrets');
  svc = await startTestService(tdb.url, { ADMIN_TOKEN: TOKEN });
});
afterAll(async () => {
  await stopTestService(svc, tdb);
});

/** A client id of this test's own. */
const clientId = (tag: string) => `${tag}-${randomBytes(4).toString('hex')}`;
const path = (client: string) => `/admin/clients/${client}/webhook-secrets`;
const admin = {
  create: (client: string) => request(svc.url).post(path(client)).set(bearer(TOKEN)),
  list: (client: string) => request(svc.url).get(path(client)).set(bearer(TOKEN)),
  remove: (client: string, id: string) =>
    request(svc.url)
      .delete(`${path(client)}/${id}`)
      .set(bearer(TOKEN)),
};

async function made(client: string): Promise<{ id: string; secret: string; createdAt: string }> {
  const res = await admin.create(client);
  expect(res.status).toBe(201);
  return res.body;
}

/** Every stored secret row (id, client, secret): what a refused request must leave as it was. */
async function stored(client?: string): Promise<{ id: string; client: string; secret: string }[]> {
  return tdb.db.$queryRaw`
    SELECT id::text, client, encode(secret, 'base64') AS secret FROM client_webhook_secrets
     WHERE ${client === undefined} OR client = ${client ?? ''} ORDER BY created_at DESC, id`;
}

const keyOf = (secret: string) => parseWebhookSecrets(secret)[0] as Buffer;

/** A receiver's check, as the Standard Webhooks libraries make it: some `v1,` signature is the HMAC of one of its keys. */
function verifies(keys: readonly Buffer[], body: string, headers: Record<string, string>): boolean {
  const content = `${headers['webhook-id']}.${headers['webhook-timestamp']}.${body}`;
  const given = (headers['webhook-signature'] ?? '').split(' ').map((s) => Buffer.from(s.replace(/^v1,/, ''), 'base64'));
  return keys.some((k) => {
    const want = createHmac('sha256', k).update(content).digest();
    return given.some((g) => g.length === want.length && timingSafeEqual(g, want));
  });
}

describe('the admin routes of clients’ webhook secrets', () => {
  it('show a made secret once, as whsec_, and list secrets without it', async () => {
    const client = clientId('shop');
    const res = await admin.create(client);
    expect(res.status).toBe(201);
    expect(res.headers['cache-control']).toBe('no-store');
    expect(Object.keys(res.body).sort()).toEqual(['client', 'createdAt', 'id', 'secret']);
    expect(res.body.client).toBe(client);
    expect(res.body.secret).toMatch(/^whsec_[A-Za-z0-9+/]+={0,2}$/);
    const key = keyOf(res.body.secret);
    expect(key).toHaveLength(32);
    expect(await stored(client)).toEqual([{ id: res.body.id, client, secret: key.toString('base64') }]);

    const list = await admin.list(client);
    expect(list.status).toBe(200);
    expect(list.body).toEqual({ secrets: [{ id: res.body.id, createdAt: res.body.createdAt }] });
    expect(JSON.stringify(list.body)).not.toMatch(/whsec_|secret"/);
    expect(JSON.stringify(list.body)).not.toContain(key.toString('base64'));
    // The service's own store, which the timers sign with, sees it at once (this instance made it).
    expect(await svc.clientSecrets?.keysFor(client)).toEqual([key]);
  });

  it('keep the two newest: a third create deletes the oldest', async () => {
    const client = clientId('rotate');
    const [first, second, third] = [await made(client), await made(client), await made(client)];
    const list = await admin.list(client);
    expect(list.body.secrets.map((s: { id: string }) => s.id)).toEqual([third.id, second.id]);
    expect((await stored(client)).map((r) => r.id)).toEqual([third.id, second.id]);
    expect(list.body.secrets.map((s: { id: string }) => s.id)).not.toContain(first.id);
    expect(await svc.clientSecrets?.keysFor(client)).toEqual([keyOf(third.secret), keyOf(second.secret)]);
  });

  it('keep the two newest when creates run at once', async () => {
    const client = clientId('race');
    for (let i = 0; i < 3; i++) await made(client);
    const before = new Set((await stored(client)).map((r) => r.id));
    for (let round = 0; round < 5; round++) {
      const both = await Promise.all([made(client), made(client)]);
      const live = (await stored(client)).map((r) => r.id);
      expect(live, `round ${round}`).toHaveLength(2);
      // The two just made are the newest: none older survived beside them.
      expect(new Set(live), `round ${round}`).toEqual(new Set(both.map((s) => s.id)));
      for (const id of live) expect(before.has(id)).toBe(false);
    }
  });

  it('delete one secret of the client named, and only that one', async () => {
    const client = clientId('del');
    const other = clientId('other');
    const [old, current] = [await made(client), await made(client)];
    const others = await made(other);

    const gone = await admin.remove(client, old.id);
    expect(gone.status).toBe(204);
    expect(gone.text).toBe('');
    expect((await admin.list(client)).body.secrets.map((s: { id: string }) => s.id)).toEqual([current.id]);
    expect(await svc.clientSecrets?.keysFor(client)).toEqual([keyOf(current.secret)]);

    const again = await admin.remove(client, old.id);
    expect(again.status).toBe(404);
    expect(again.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(again.body.code).toBe('WEBHOOK_SECRET_NOT_FOUND');
    // Another client's id is unknown under this client's path, and stays.
    expect((await admin.remove(client, others.id)).body.code).toBe('WEBHOOK_SECRET_NOT_FOUND');
    expect((await stored(other)).map((r) => r.id)).toEqual([others.id]);
    expect((await admin.remove(client, '00000000-0000-4000-8000-000000000000')).status).toBe(404);
  });

  it('answer 401 without the admin token (an API key does not do) and write nothing', async () => {
    const client = clientId('anon');
    const kept = await made(client);
    const before = await stored();
    for (const headers of [{}, bearer('wrong-token'), bearer(svc.key)]) {
      const calls = [
        request(svc.url).post(path(client)).set(headers),
        request(svc.url).get(path(client)).set(headers),
        request(svc.url)
          .delete(`${path(client)}/${kept.id}`)
          .set(headers),
      ];
      for (const res of await Promise.all(calls)) {
        expect(res.status).toBe(401);
        expect(res.body.code).toBe('UNAUTHORIZED');
        expect(JSON.stringify(res.body)).not.toContain('whsec_');
      }
    }
    expect(await stored()).toEqual(before);
  });

  it('refuse a bad client or id with 400 problem+json and write nothing', async () => {
    const client = clientId('bad');
    const kept = await made(client);
    const before = await stored();
    const badClients = ['a%20b', 'a%2Fb', 'x'.repeat(65), 'caf%C3%A9', 'a%00'];
    for (const bad of badClients) {
      for (const res of [await admin.create(bad), await admin.list(bad), await admin.remove(bad, kept.id)]) {
        expect(res.status, bad).toBe(400);
        expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
        expect(res.body.code, bad).toBe('INVALID_CLIENT');
      }
    }
    for (const badId of ['nope', kept.id.slice(0, -1), `${kept.id}0`, '1']) {
      const res = await admin.remove(client, badId);
      expect(res.status, badId).toBe(400);
      expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(res.body.code, badId).toBe('INVALID_WEBHOOK_SECRET_ID');
    }
    expect(await stored()).toEqual(before);
  });
});

describe('the store of clients’ webhook secrets', () => {
  it('gives the live keys newest first, and never one client’s to another', async () => {
    const store = createClientWebhookSecrets(tdb.db, { cacheMs: 0 });
    const [a, b] = [clientId('a'), clientId('b')];
    const a1 = await store.create(a);
    const b1 = await store.create(b);
    const a2 = await store.create(a);
    expect(await store.keysFor(a)).toEqual([keyOf(a2.secret), keyOf(a1.secret)]);
    expect(await store.keysFor(b)).toEqual([keyOf(b1.secret)]);
    expect(await store.keysFor(clientId('none'))).toEqual([]);
    expect((await store.list(a)).map((s) => s.id)).toEqual([a2.id, a1.id]);
    expect(await store.remove(b, a1.id)).toBe(false);
    expect(await store.keysFor(a)).toHaveLength(2);
  });

  it('signs with a client’s keys what only that client’s receiver accepts, through a rotation', async () => {
    const store = createClientWebhookSecrets(tdb.db, { cacheMs: 0 });
    const [a, b] = [clientId('sign-a'), clientId('sign-b')];
    const aOld = keyOf((await store.create(a)).secret);
    const bKey = keyOf((await store.create(b)).secret);
    const body = JSON.stringify({ timer: 'k1', at: 1 });
    const signedA = signWebhook(await store.keysFor(a), 'msg_1', body);
    expect(verifies([aOld], body, signedA)).toBe(true);
    expect(verifies([bKey], body, signedA)).toBe(false);
    expect(verifies(await store.keysFor(b), body, signedA)).toBe(false);
    expect(verifies([aOld], JSON.stringify({ timer: 'k2', at: 1 }), signedA)).toBe(false);

    // A rotation: both keys sign, so a receiver that knows either accepts.
    const aNew = keyOf((await store.create(a)).secret);
    const during = signWebhook(await store.keysFor(a), 'msg_2', body);
    expect(during['webhook-signature']?.split(' ')).toHaveLength(2);
    expect(verifies([aOld], body, during)).toBe(true);
    expect(verifies([aNew], body, during)).toBe(true);
    expect(verifies([bKey], body, during)).toBe(false);
  });

  it('caches a client’s keys: one lookup for concurrent calls, another instance’s create seen only after the cache time', async () => {
    const client = clientId('cache');
    const elsewhere = createClientWebhookSecrets(tdb.db, { cacheMs: 0 });
    const first = keyOf((await elsewhere.create(client)).secret);

    // A cache time far beyond this test: what it answers is its first lookup's.
    const held = createClientWebhookSecrets(tdb.db, { cacheMs: 10 * 60_000 });
    const answers = await Promise.all(Array.from({ length: 10 }, () => held.keysFor(client)));
    expect(answers[0]).toEqual([first]);
    for (const a of answers) expect(a).toBe(answers[0]); // one lookup shared, not ten
    const second = keyOf((await elsewhere.create(client)).secret);
    expect(await held.keysFor(client)).toBe(answers[0]);
    // Its own change is seen at once.
    const third = keyOf((await held.create(client)).secret);
    expect(await held.keysFor(client)).toEqual([third, second]);

    // A short cache time: the other instance's change is seen once it has passed since the lookup started.
    const cacheMs = 200;
    const short = createClientWebhookSecrets(tdb.db, { cacheMs });
    const before = await short.keysFor(client);
    expect(before).toEqual([third, second]);
    const fourth = keyOf((await elsewhere.create(client)).secret);
    await sleep(cacheMs + 50);
    expect(await short.keysFor(client)).toEqual([fourth, third]);
  });

  it('keeps two when many creates of one client run at once', async () => {
    const store = createClientWebhookSecrets(tdb.db);
    const client = clientId('many');
    for (let i = 0; i < 3; i++) await store.create(client);
    const all = await Promise.all(Array.from({ length: 8 }, () => store.create(client)));
    const live = await store.list(client);
    expect(live).toHaveLength(2);
    // The survivors are the two made last (each create's row is newer than every row it found).
    const newestTwo = [...all].sort((x, y) => y.createdAt.getTime() - x.createdAt.getTime()).slice(0, 2);
    expect(live.map((s) => s.id)).toEqual(newestTwo.map((s) => s.id));
    expect(new Set(all.map((s) => s.createdAt.getTime())).size).toBe(all.length);
  });
});
