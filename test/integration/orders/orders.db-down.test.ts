// PostgreSQL not answering: the API says 503 with a problem body instead of a
// 500, and readiness names the database; a connection ended under a
// transaction counts as the database being away, not as a bug.
import request from 'supertest';
import { afterAll, describe, expect, it } from 'vitest';
import { createApp } from '../../../src/app.js';
import { apiKeyStore } from '../../../src/core/auth/api-keys.js';
import { apiKeyGuard } from '../../../src/core/auth/guard.js';
import { rateLimit } from '../../../src/core/rate-limit.js';
import { createDb } from '../../../src/core/db.js';
import { isDatabaseUnavailable } from '../../../src/core/db-errors.js';
import { freePort } from '../../../src/core/free-port.js';
import { createLogger } from '../../../src/core/logger.js';
import { createRedis } from '../../../src/core/redis.js';
import { createOrdersModule } from '../../../src/modules/orders/orders.module.js';
import { loadConfig } from '../../../src/config.js';
import { type TestDb, adminQuery, createTestDb } from '../../helpers/db.js';
import { orderBody } from '../../helpers/bodies.js';
import { REDIS_URL, waitFor } from '../../helpers/redis.js';
import { bearer } from '../../helpers/service.js';

const redis = createRedis(REDIS_URL, 'db-down-test');
afterAll(() => redis.disconnect());

describe('database unavailable', () => {
  it('answers 503 DATABASE_UNAVAILABLE and reports not ready', async () => {
    const port = await freePort(); // nothing listens here
    const db = createDb(`postgresql://postgres@127.0.0.1:${port}/none`, 1);
    const log = createLogger('silent');
    const orders = createOrdersModule({ db, redis, config: loadConfig({ QUEUE_PREFIX: 'dbdown' }), log, dispatch: async () => {} });
    const guard = apiKeyGuard({
      keys: apiKeyStore(db),
      perKey: rateLimit(redis, 'dbdown', 'key', 1_000, 1_000),
      perClient: rateLimit(redis, 'dbdown', 'client', 1_000, 1_000),
      failures: rateLimit(redis, 'dbdown', 'authfail', 1_000, 1_000),
      log,
    });
    const app = createApp({ log, redis, db, routes: [orders.routes], guard });
    // Shaped like a key: the guard has to ask the database, which is not there.
    const key = `ots_${'0'.repeat(32)}_${'A'.repeat(43)}`;
    const create = await request(app)
      .post('/orders')
      .set(bearer(key))
      .send(orderBody({ customerId: 'c' }));
    expect(create.status).toBe(503);
    expect(create.headers['content-type']).toMatch(/application\/problem\+json/);
    expect(create.body.code).toBe('DATABASE_UNAVAILABLE');
    const get = await request(app).get('/orders/00000000-0000-4000-8000-000000000000').set(bearer(key));
    expect(get.status).toBe(503);
    const ready = await request(app).get('/readyz');
    expect(ready.status).toBe(503);
    expect(ready.body).toMatchObject({ code: 'NOT_READY', detail: 'postgres' });
    await db.$disconnect();
  });
});

describe('a connection ended by the administrator', () => {
  it('is recognised as the database being unavailable when it ends a transaction at its COMMIT', async () => {
    const tdb = await createTestDb('db_down', { migrate: false });
    try {
      // A deferred trigger holds the COMMIT for a while, so the backend is
      // ended while the COMMIT runs: PostgreSQL answers the COMMIT with 57P01,
      // which reaches us as the driver adapter's own error, not wrapped by Prisma.
      await tdb.db.$executeRawUnsafe(`CREATE TABLE slow_commit (id int)`);
      await tdb.db.$executeRawUnsafe(`CREATE FUNCTION sleep_a_while() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(10); RETURN NULL; END $$`);
      await tdb.db.$executeRawUnsafe(
        `CREATE CONSTRAINT TRIGGER at_commit AFTER INSERT ON slow_commit DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION sleep_a_while()`,
      );
      let pid = 0;
      const transaction = tdb.db.$transaction(async (tx) => {
        const [me] = await tx.$queryRaw<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`;
        pid = Number(me!.pid);
        await tx.$executeRaw`INSERT INTO slow_commit VALUES (1)`;
      });
      const failure = transaction.then(
        () => null,
        (err: unknown) => err,
      );
      expect(await waitFor(() => committing(tdb, pid), 5_000, 25), 'the transaction reached its COMMIT').toBe(true);
      await adminQuery(`SELECT pg_terminate_backend(${pid})`);
      const err = await failure;
      expect(err).toBeInstanceOf(Error);
      expect(String(err)).toMatch(/terminating connection due to administrator command/);
      expect(isDatabaseUnavailable(err)).toBe(true);
      // Counted on a connection of its own: the adapter hands the ended
      // connection back to the pool as if it were whole, and a query that
      // takes it before its socket closes fails with "Connection terminated"
      // (a 503 in the service; here it would only blur the check).
      expect(await adminQuery(`SELECT count(*)::int AS n FROM slow_commit`, tdb.url)).toEqual([{ n: 0 }]);
    } finally {
      await tdb.drop();
    }
  });
});

/** Whether the session `pid` is running its COMMIT. */
async function committing(tdb: TestDb, pid: number): Promise<boolean> {
  if (pid === 0) return false;
  const [row] = await tdb.db.$queryRaw<{ q: string | null }[]>`SELECT query AS q FROM pg_stat_activity WHERE pid = ${pid}`;
  return /^\s*COMMIT/i.test(row?.q ?? '');
}
