// The clients migration on a database the build before it filled: every row
// becomes the client 'default''s, an idempotency key of the old form
// ("<api key id>:<key>") takes the new one ("default/<key>"), so a create
// retried across the upgrade replays; where two keys used one value the
// newest row takes it. After it, a client id that is not one is refused by
// the database itself.
import { cpSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../../src/core/logger.js';
import { MIGRATIONS_DIR, migrate, readMigrations } from '../../../src/core/migrate.js';
import { orderBody } from '../../helpers/bodies.js';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { bearer, makeApiKey, startTestService, type TestService } from '../../helpers/service.js';

const CLIENTS = '20261127000000_clients';
const log = createLogger('silent');
let tdb: TestDb;
let svc: TestService | undefined;

beforeAll(async () => {
  tdb = await createTestDb('migrate_clients', { migrate: false });
});
afterAll(async () => {
  await svc?.stop();
  await tdb?.drop();
});

/** A directory holding the migrations before the clients one. */
function before(): string {
  const dir = mkdtempSync(join(tmpdir(), 'ots-migrations-'));
  for (const m of readMigrations().filter((m) => m.name < CLIENTS)) cpSync(join(MIGRATIONS_DIR, m.name), join(dir, m.name), { recursive: true });
  return dir;
}

describe('the clients migration', () => {
  it("makes every existing row the default client's and keeps old idempotency keys replaying", async () => {
    await migrate(tdb.url, log, before());
    const keyA = randomUUID();
    const keyB = randomUUID();
    const older = randomUUID();
    const newer = randomUUID();
    const lone = randomUUID();
    const insert = (id: string, key: string, createdAt: string) =>
      tdb.db.$executeRawUnsafe(
        `INSERT INTO orders (id, customer_id, currency, total_cents, created_at, expires_at, idempotency_key, request_hash)
         VALUES ('${id}', 'c', 'EUR', 100, '${createdAt}', now() + interval '1 hour', '${key}', '${'0'.repeat(64)}')`,
      );
    // Two keys of the one client there was used the same value: the newer row takes it.
    await insert(older, `${keyA}:shared`, '2026-11-26T10:00:00Z');
    await insert(newer, `${keyB}:shared`, '2026-11-26T11:00:00Z');
    await insert(lone, `${keyA}:lone`, '2026-11-26T12:00:00Z');
    await tdb.db.$executeRawUnsafe(`INSERT INTO areas (code, vehicle_plate, sorter_contact) VALUES ('M1', 'M-1', 'm@example.com')`);
    await tdb.db.$executeRawUnsafe(`INSERT INTO parcels (tracking_no, area_code) VALUES ('MT-1', 'M1')`);

    await migrate(tdb.url, log);
    const keys = await tdb.db.$queryRawUnsafe<{ id: string; client: string; idempotency_key: string }[]>(
      `SELECT id::text, client, idempotency_key FROM orders ORDER BY created_at`,
    );
    expect(keys).toEqual([
      { id: older, client: 'default', idempotency_key: `${keyA}:shared` },
      { id: newer, client: 'default', idempotency_key: 'default/shared' },
      { id: lone, client: 'default', idempotency_key: 'default/lone' },
    ]);
    expect(await tdb.db.$queryRawUnsafe(`SELECT client, code FROM areas`)).toEqual([{ client: 'default', code: 'M1' }]);
    expect(await tdb.db.$queryRawUnsafe(`SELECT client, tracking_no FROM parcels`)).toEqual([{ client: 'default', tracking_no: 'MT-1' }]);
    // The database refuses a client id the API would.
    await expect(
      tdb.db.$executeRawUnsafe(`INSERT INTO areas (client, code, vehicle_plate, sorter_contact) VALUES ('a/b', 'M2', 'M-2', 'm@example.com')`),
    ).rejects.toThrow(/areas_client_check/);
  });

  it('finds an old key under its new form: a create retried across the upgrade is answered from it, not made twice', async () => {
    svc = await startTestService(tdb.url, {}, 'api');
    const key = (await makeApiKey(tdb.url, ['orders:write'])).key;
    const body = orderBody();
    const count = async () => (await tdb.db.$queryRawUnsafe<{ n: number }[]>(`SELECT count(*)::int AS n FROM orders`))[0]?.n;
    const n = await count();
    // The stored body hash is a made-up one, so the retry is judged another body: found, and refused, never a second order.
    const retried = await request(svc.url).post('/orders').set(bearer(key)).set('Idempotency-Key', 'lone').send(body);
    expect(retried.status).toBe(422);
    expect(retried.body.code).toBe('IDEMPOTENCY_KEY_REUSED');
    expect(await count()).toBe(n);
    const fresh = await request(svc.url).post('/orders').set(bearer(key)).set('Idempotency-Key', 'never-used').send(body);
    expect(fresh.status).toBe(201);
    expect((await request(svc.url).post('/orders').set(bearer(key)).set('Idempotency-Key', 'never-used').send(body)).headers['idempotent-replayed']).toBe(
      'true',
    );
  });
});
