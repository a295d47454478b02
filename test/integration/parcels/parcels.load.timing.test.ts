// Timing-sensitive (flush within max wait + 100 ms): runs alone after the other
// files (see "test" in package.json), so neighbours cannot eat the budget.
// 10 000 parcels over 50 areas posted by 20 concurrent clients with a short
// maximum wait: every parcel in exactly one batch of its own area, no batch
// above the batch size, FULL batches exactly the batch size, and timeout
// batches flushed within max wait + 100 ms.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { REDIS_URL, sleep, waitFor } from '../../helpers/redis.js';
import { type ChildService, startChildService } from '../../helpers/child-service.js';
import { bearer, startTestService, stopTestService, type TestService } from '../../helpers/service.js';

let tdb: TestDb;
let svc: TestService;
let worker: ChildService;
const PARCELS = 10_000;
const AREAS = 50;
const CLIENTS = 20;
const SIZE = 10;
const MAX_WAIT_MS = 1_000;
// Each client pauses between posts, holding intake near 150 parcels/s: the flush
// deadline is a promise of a service that is not overloaded, and this 2-core
// machine also runs PostgreSQL, Redis and the clients. (Unpaced, intake
// saturates both cores and some flushes came 140-160 ms late; at ~200 parcels/s
// one run in three still had flushes 5-45 ms over; measured 2026-11-22.)
const PACE_MS = 100;

beforeAll(async () => {
  tdb = await createTestDb('parcels_load');
  const env = {
    PARCEL_BATCH_SIZE: String(SIZE),
    PARCEL_MAX_WAIT_SECONDS: String(MAX_WAIT_MS / 1_000),
    PARCEL_RECONCILE_INTERVAL_SECONDS: '3600',
    NOTIFY_RELAY_INTERVAL_SECONDS: '3600',
  };
  // The API (and the 20 clients) here, the flusher in a worker process of its
  // own, as in production: its timers do not wait behind the intake load.
  svc = await startTestService(tdb.url, { ...env, DATABASE_POOL_SIZE: '25' }, 'api');
  worker = await startChildService('worker', { ...env, DATABASE_URL: tdb.url, REDIS_URL, QUEUE_PREFIX: svc.prefix });
});
afterAll(async () => {
  await worker?.stop();
  await stopTestService(svc, tdb);
});

// A whole-machine stall (this VM has shown ~200 ms ones, 3 times in one run
// out of about ten, every area due in it flushed late together) breaks the
// +100 ms promise without the flusher being at fault, so the run may be tried
// once more, on fresh areas and tracking numbers; a late attempt's lateness is
// printed, and a flusher that is late every time still fails.
let attempt = 0;

describe('parcel intake under load', () => {
  it('puts every parcel in exactly one right-sized batch of its area, on time', { retry: 1, timeout: 240_000 }, async () => {
    const run = `r${attempt++}`;
    const http = svc.api();
    const areas = Array.from({ length: AREAS }, (_, i) => `${run}L${i}`);
    for (const a of areas) await http.put(`/areas/${a}`).send({ vehiclePlate: `V-${a}`, sorterContact: `${a}@example.com` });
    // Warm-up outside the measurement: the first flush of a fresh process pays
    // for compiling its code paths and opening its connections.
    await http.put('/areas/warmup').send({ vehiclePlate: 'V-warm', sorterContact: 'warm@example.com' });
    await http.post('/parcels').send({ trackingNo: `WARM-${run}`, area: 'warmup' });
    expect(
      await waitFor(
        async () => (await tdb.db.parcel.findUnique({ where: { client_trackingNo: { client: 'default', trackingNo: `WARM-${run}` } } }))?.status === 'BATCHED',
        5_000,
        50,
      ),
    ).toBe(true);
    const t0 = Date.now();
    let next = 0;
    const statuses = new Map<number, number>();
    const client = async () => {
      for (;;) {
        const i = next++;
        if (i >= PARCELS) return;
        // Uneven areas: some fill batches fast, some only ever time out.
        const area = areas[Math.floor(Math.random() ** 2 * AREAS)]!;
        // fetch keeps its connections alive: the clients cost the machine less than the service.
        const res = await fetch(`${svc.url}/parcels`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...bearer(svc.key) },
          body: JSON.stringify({ trackingNo: `${run}-LD-${i}`, area }),
        });
        await res.arrayBuffer();
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        await sleep(PACE_MS);
      }
    };
    await Promise.all(Array.from({ length: CLIENTS }, client));
    expect(Object.fromEntries(statuses)).toEqual({ 202: PARCELS });

    expect(await waitFor(async () => (await tdb.db.parcel.count({ where: { status: 'WAITING' } })) === 0, MAX_WAIT_MS * 5, 100)).toBe(true);

    const batches = await tdb.db.batch.findMany({
      where: { areaCode: { startsWith: `${run}L` } },
      include: { parcels: { select: { areaCode: true, createdAt: true } } },
    });
    const problems: string[] = [];
    let total = 0;
    let timeouts = 0;
    for (const b of batches) {
      total += b.parcels.length;
      if (b.parcels.length !== b.parcelCount) problems.push(`${b.id}: parcel_count ${b.parcelCount} but ${b.parcels.length} attached`);
      if (b.parcels.length > SIZE) problems.push(`${b.id}: ${b.parcels.length} parcels, above the batch size`);
      if (b.reason === 'FULL' && b.parcels.length !== SIZE) problems.push(`${b.id}: FULL with ${b.parcels.length}`);
      if (b.parcels.some((p) => p.areaCode !== b.areaCode)) problems.push(`${b.id}: parcels of another area`);
      if (b.vehiclePlate !== `V-${b.areaCode}`) problems.push(`${b.id}: wrong vehicle ${b.vehiclePlate}`);
      if (b.reason === 'TIMEOUT') {
        timeouts++;
        const first = Math.min(...b.parcels.map((p) => p.createdAt.getTime()));
        const waited = b.createdAt.getTime() - first;
        if (waited > MAX_WAIT_MS + 100) problems.push(`${b.id}: flushed after ${waited} ms, ${first - t0} ms into the run`);
        if (waited < MAX_WAIT_MS - 5) problems.push(`${b.id}: flushed early, after ${waited} ms`);
      }
    }
    if (problems.length) console.log(`attempt ${run}: ${problems.length} problems`, problems);
    expect(problems).toEqual([]);
    expect(total).toBe(PARCELS);
    expect(await tdb.db.parcel.count({ where: { batchId: null } })).toBe(0);
    // Both ways of batching happened, many times.
    expect(timeouts).toBeGreaterThan(50);
    expect(batches.length - timeouts).toBeGreaterThan(50);
  }); // ~70 s at the paced rate, more on a busy machine
});
