// The parcels' integration files' one set-up: a database and a running
// service of their own per file (registered with beforeAll/afterAll by the
// call), and the calls they make on the API, the rows and the Redis groups.
import { afterAll, beforeAll } from 'vitest';
import type { ServiceModule } from '../../../src/core/module.js';
import type { Batcher } from '../../../src/queue/index.js';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { redisClient } from '../../helpers/redis.js';
import { startTestService, stopTestService, type TestService } from '../../helpers/service.js';

/** The parcels module as the tests reach into it. */
export type ParcelsModule = ServiceModule & {
  batcher: Batcher;
  reconcile: { run(): Promise<{ batches: number; parcels: number; regrouped: number; rules: number }> };
};

/**
 * Starts the service on a database named `dbName` with `env` (over a
 * reconciliation pass that never runs on its own and no grace), for the
 * calling file's tests; in the API role, no flusher runs (the test plays it).
 */
export function useParcelsService(dbName: string, env: Record<string, string>, role: 'all' | 'api' = 'all') {
  let tdb: TestDb | undefined;
  let svc: TestService | undefined;
  const redis = redisClient(`${dbName}-test`);
  beforeAll(async () => {
    tdb = await createTestDb(dbName);
    svc = await startTestService(tdb.url, { PARCEL_RECONCILE_INTERVAL_SECONDS: '3600', PARCEL_RECONCILE_GRACE_SECONDS: '0', ...env }, role);
  });
  afterAll(async () => {
    redis.disconnect();
    await stopTestService(svc, tdb);
  });
  const started = () => {
    if (!tdb || !svc) throw new Error('the parcels service is not started (use it inside a test)');
    return { tdb, svc };
  };
  const api = () => started().svc.api();
  const module = () => started().svc.module('parcels') as ParcelsModule;
  /** PUT /areas/:code as sent (vehicle V-<code>, sorter s-<code>@example.com), the answer unchecked. */
  const putArea = (code: string, rule: Record<string, unknown> = {}) =>
    api()
      .put(`/areas/${code}`)
      .send({ vehiclePlate: `V-${code}`.slice(0, 16), sorterContact: `s-${code.toLowerCase()}@example.com`, ...rule });
  return {
    get tdb(): TestDb {
      return started().tdb;
    },
    get svc(): TestService {
      return started().svc;
    },
    module,
    batcher: () => module().batcher,
    putArea,
    /** An area set (200 expected). */
    area: (code: string, rule: Record<string, unknown> = {}) => putArea(code, rule).expect(200),
    post: (trackingNo: string, area: string) => api().post('/parcels').send({ trackingNo, area }),
    flush: (code: string, idempotencyKey?: string) => {
      const req = api().post(`/areas/${code}/flush`);
      return idempotencyKey === undefined ? req : req.set('Idempotency-Key', idempotencyKey);
    },
    withdraw: (t: string) => api().post(`/parcels/${encodeURIComponent(t)}/withdraw`),
    move: (t: string, body: unknown) =>
      api()
        .post(`/parcels/${encodeURIComponent(t)}/move`)
        .send(body as object),
    /** The default client's parcel row. */
    row: (t: string) => started().tdb.db.parcel.findUniqueOrThrow({ where: { client_trackingNo: { client: 'default', trackingNo: t } } }),
    batchesOf: (area: string) => started().tdb.db.batch.findMany({ where: { areaCode: area }, include: { parcels: true }, orderBy: { createdAt: 'asc' } }),
    /** Whether the default client's group `group` (shard 0) holds `t`. */
    inGroup: async (group: string, t: string) => (await redis.zscore(`${module().batcher.keys[0]!.itemsPrefix}${group}`, t)) !== null,
  };
}
