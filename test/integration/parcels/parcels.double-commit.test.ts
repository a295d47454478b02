// Two committers meet over one area: the reconciliation pass batches an overdue
// parcel while the flusher has taken it out of Redis together with a younger
// one (found by the parcels model-based suite, 2026-11-23: with Redis faults,
// a young parcel ended alone in a TIMEOUT batch a second before its maximum
// wait). What the flusher holds is no longer a batch: the young parcel must go
// back to waiting, in Redis with its arrival, and be batched at its own deadline.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ServiceModule } from '../../../src/core/module.js';
import type { DueBatch } from '../../../src/queue/scripts/batch-scripts.js';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { sleep, waitFor } from '../../helpers/redis.js';
import { startTestService, stopTestService, type TestService } from '../../helpers/service.js';

const MAX_WAIT_MS = 1_000;
let tdb: TestDb;
let svc: TestService;

type Parcels = ServiceModule & {
  service: { flushTimedOut(b: readonly DueBatch[]): Promise<void> };
  reconcile: { run(): Promise<unknown> };
  batcher: { takeDue(shard: number): Promise<{ batches: DueBatch[] }>; waiting(group: string): Promise<{ count: number; firstArrival: number | null }> };
};

beforeAll(async () => {
  tdb = await createTestDb('parcels_double');
  // The API role: no flusher runs; the test plays it.
  svc = await startTestService(
    tdb.url,
    {
      PARCEL_BATCH_SIZE: '10',
      PARCEL_MAX_WAIT_SECONDS: String(MAX_WAIT_MS / 1_000),
      PARCEL_RECONCILE_GRACE_SECONDS: '0',
      PARCEL_RECONCILE_INTERVAL_SECONDS: '3600',
    },
    'api',
  );
  await svc.api().put('/areas/DC-1').send({ vehiclePlate: 'DC-1', sorterContact: 'dc@example.com' }).expect(200);
});
afterAll(async () => stopTestService(svc, tdb));

const parcel = (t: string) => tdb.db.parcel.findUniqueOrThrow({ where: { client_trackingNo: { client: 'default', trackingNo: t } } });

describe('a flush that meets a reconciliation pass', () => {
  it('batches only what is still a batch and puts the rest back to wait', async () => {
    const parcels = svc.module('parcels') as Parcels;
    await svc.api().post('/parcels').send({ trackingNo: 'DC-OLD', area: 'DC-1' }).expect(202);
    await sleep(MAX_WAIT_MS + 200);
    await svc.api().post('/parcels').send({ trackingNo: 'DC-YOUNG', area: 'DC-1' }).expect(202);
    const youngAt = (await parcel('DC-YOUNG')).createdAt.getTime();

    const taken = (await parcels.batcher.takeDue(0)).batches;
    expect(taken.flatMap((b) => b.items.map((i) => i.item)).sort()).toEqual(['DC-OLD', 'DC-YOUNG']);
    await parcels.reconcile.run(); // batches DC-OLD, overdue, on its own
    await parcels.service.flushTimedOut(taken);

    expect((await parcel('DC-OLD')).status).toBe('BATCHED');
    expect(await parcel('DC-YOUNG')).toMatchObject({ status: 'WAITING', batchId: null });
    // Back in Redis with its arrival (within the hold of a not-yet-due leftover, 1 s at most).
    expect(await waitFor(async () => (await parcels.batcher.waiting('DC-1')).count === 1, 5_000, 50)).toBe(true);
    expect(await parcels.batcher.waiting('DC-1')).toMatchObject({ count: 1, firstArrival: youngAt });

    // At its own deadline it is a batch: TIMEOUT, never before it.
    await sleep(Math.max(0, youngAt + MAX_WAIT_MS - Date.now()) + 50);
    await parcels.service.flushTimedOut((await parcels.batcher.takeDue(0)).batches);
    const young = await parcel('DC-YOUNG');
    expect(young.status).toBe('BATCHED');
    expect(young.batchedAt!.getTime()).toBeGreaterThanOrEqual(youngAt + MAX_WAIT_MS);
  });
});
