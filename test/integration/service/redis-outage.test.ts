// The service while its Redis hangs (SIGSTOP) or its connections go silent
// (a path that drops packets without a reset), and after (review 2026-11-23:
// F4, F7, F16):
// - requests that need Redis answer within about 2 s: 201 when PostgreSQL
//   holds the truth, 503 for the operators' queue views; /metrics answers
//   with the queue depths left out; readiness is 503;
// - nothing piles up in the client while it hangs, and nothing sent during the
//   hang runs late with an effect (a parcel add cannot take a batch out after
//   its request gave up);
// - after the hang, work resumes by itself: the orders made during it are cancelled;
// - a silent connection is noticed and replaced: the API schedules again and
//   the parcel flusher flushes again.
import type { Response } from 'supertest';
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PARCELS_QUEUE } from '../../../src/modules/parcels/parcels.module.js';
import { batcherKeys, batcherPrefix, shardKeys } from '../../../src/queue/keys.js';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { getRecord } from '../../helpers/records.js';
import { sleep, waitFor } from '../../helpers/redis.js';
import { type PrivateRedis, startPrivateRedis } from '../../helpers/redis-server.js';
import { startTestService, stopTestService, type TestService } from '../../helpers/service.js';
import { orderBody } from '../../helpers/bodies.js';
import { expireJobId } from '../../../src/modules/orders/orders.service.js';
import { type TcpProxy, startTcpProxy } from '../../helpers/tcp-proxy.js';

const ADMIN_TOKEN = 'outage-test-admin-token-0123456789';
const SOCKET_TIMEOUT_MS = 3_000;
// Answers due within about 2 s (one bounded Redis call after the database
// work); the margin is for a slow, busy machine.
const ANSWER_MS = 4_000;

let server: PrivateRedis;
let proxy: TcpProxy;
let direct: Redis;
let tdb: TestDb;
let svc: TestService;
let pid = 0;

beforeAll(async () => {
  server = await startPrivateRedis();
  proxy = await startTcpProxy({ port: server.port });
  direct = new Redis(server.url, { maxRetriesPerRequest: null });
  direct.on('error', () => {});
  pid = Number(/process_id:(\d+)/.exec(await direct.info('server'))?.[1]);
  tdb = await createTestDb('redis_outage');
  svc = await startTestService(tdb.url, {
    REDIS_URL: `redis://127.0.0.1:${proxy.port}`,
    REDIS_CLUSTER_NODES: '',
    QUEUE_SHARDS: '1',
    ADMIN_TOKEN,
    REDIS_SOCKET_TIMEOUT_MS: String(SOCKET_TIMEOUT_MS),
    WORKER_IDLE_RECHECK_MS: '500',
    ORDER_RECONCILE_INTERVAL_SECONDS: '1',
    ORDER_RECONCILE_GRACE_SECONDS: '1',
    PARCEL_BATCH_SIZE: '2',
    PARCEL_MAX_WAIT_SECONDS: '3',
    PARCEL_RECONCILE_INTERVAL_SECONDS: '3600',
  });
  await svc.api().put('/areas/OUT-A').send({ vehiclePlate: 'OUT-1', sorterContact: 'a@example.com' }).expect(200);
  await svc.api().put('/areas/OUT-B').send({ vehiclePlate: 'OUT-2', sorterContact: 'b@example.com' }).expect(200);
});
afterAll(async () => {
  if (pid) process.kill(pid, 'SIGCONT');
  await stopTestService(svc, tdb);
  direct?.disconnect();
  await proxy?.close();
  await server?.stop();
});

/** How long `f` took to answer (ms), and its answer. */
async function timed<T>(f: () => Promise<T>): Promise<{ ms: number; value: T }> {
  const t0 = Date.now();
  const value = await f();
  return { ms: Date.now() - t0, value };
}

const order = () =>
  svc
    .api()
    .post('/orders')
    .send(orderBody({ customerId: 'outage', paymentTimeoutSeconds: 1 }));
const items = (area: string) => `${batcherKeys(batcherPrefix(svc.prefix), PARCELS_QUEUE, 0).itemsPrefix}${area}`;

describe('Redis hung (SIGSTOP)', () => {
  it('answers in time, piles nothing up, runs nothing stale, and resumes by itself', async () => {
    // A parcel waits in its area's group before the hang (batch size 2, maximum wait 3 s).
    await svc.api().post('/parcels').send({ trackingNo: 'OUT-P1', area: 'OUT-B' }).expect(202);
    expect(await direct.zscore(items('OUT-B'), 'OUT-P1')).not.toBeNull();

    process.kill(pid, 'SIGSTOP');
    const hungAt = Date.now();
    let created: string[] = [];
    try {
      const first = await timed(() => order());
      expect(first.value.status).toBe(201);
      expect(first.ms).toBeLessThan(ANSWER_MS);
      // The second parcel's add would fill the group: sent now, it reaches Redis only after the hang.
      const parcel = await timed(() => svc.api().post('/parcels').send({ trackingNo: 'OUT-P2', area: 'OUT-B' }));
      expect(parcel.value.status).toBe(202);
      expect(parcel.value.body.status).toBe('WAITING');
      expect(parcel.ms).toBeLessThan(ANSWER_MS);

      const metrics = await timed(() => svc.api().get('/metrics'));
      expect(metrics.value.status).toBe(200);
      expect(metrics.ms).toBeLessThan(ANSWER_MS);
      expect(metrics.value.text).toMatch(/^ots_queue_stats_up 0$/m);
      expect(metrics.value.text).not.toMatch(/^ots_queue_jobs\{/m);
      expect(metrics.value.text).toMatch(/^ots_process_resident_memory_bytes /m);

      const admin = await timed(() => svc.api().get('/admin/queues').set('authorization', `Bearer ${ADMIN_TOKEN}`));
      expect(admin.value.status).toBe(503);
      expect(admin.value.body.code).toBe('REDIS_UNAVAILABLE');
      expect(admin.ms).toBeLessThan(ANSWER_MS);
      expect((await svc.api().get('/readyz')).status).toBe(503);

      // Requests keep coming through the hang; once the socket timeout has
      // ended the hung connection, the client holds nothing for later.
      const more: Promise<Response>[] = [];
      while (Date.now() - hungAt < SOCKET_TIMEOUT_MS + 1_500) {
        more.push(order());
        await sleep(20);
      }
      const answers = await Promise.all(more);
      expect(answers.every((r) => r.status === 201)).toBe(true);
      created = [first.value.body.id, ...answers.map((r) => r.body.id as string)];
      const api = svc.redis as unknown as { offlineQueue: { length: number }; commandQueue: { length: number } };
      expect(api.offlineQueue.length + api.commandQueue.length).toBeLessThan(20);
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    const resumedAt = Date.now();

    // The add sent during the hang ran after its deadline and took nothing
    // out: the first parcel was still there for the flusher, which batched it
    // at its maximum wait. (Had the late add taken both out, nobody would have
    // committed them: both would wait for the reconciliation pass, off here.)
    const flushed = await waitFor(
      async () => (await tdb.db.parcel.findUnique({ where: { client_trackingNo: { client: 'default', trackingNo: 'OUT-P1' } } }))?.status === 'BATCHED',
      10_000,
      100,
    );
    expect(flushed, 'the parcel waiting before the hang is batched after it').toBe(true);
    expect((await tdb.db.parcel.findUniqueOrThrow({ where: { client_trackingNo: { client: 'default', trackingNo: 'OUT-P2' } } })).status).toBe('WAITING');

    // Every order made during the hang is cancelled once Redis is back (the
    // reconciliation pass, its expiry jobs having missed Redis).
    const settled = await waitFor(
      async () => {
        const n = await tdb.db.order.count({ where: { id: { in: created }, status: 'CANCELLED' } });
        return n === created.length;
      },
      20_000,
      100,
    );
    const recoveryMs = Date.now() - resumedAt;
    console.log(JSON.stringify({ test: 'redis-hang', ordersDuringHang: created.length, recoveryMs }));
    expect(settled, `orders made during the hang cancelled after it`).toBe(true);
    expect((await svc.api().get('/readyz')).status).toBe(200);
  });
});

describe('connections gone silent', () => {
  it('notices them, replaces them, and schedules and flushes again', async () => {
    expect(await waitFor(async () => (await svc.api().get('/readyz')).status === 200, 10_000, 100)).toBe(true);
    const silenced = proxy.silence();
    expect(silenced).toBeGreaterThan(0);

    // The API answers while its connection is silent, and is back on a new one after the socket timeout.
    const during = await timed(() => order());
    expect(during.value.status).toBe(201);
    expect(during.ms).toBeLessThan(ANSWER_MS);
    let after = '';
    const scheduled = await waitFor(
      async () => {
        const r = await order();
        if (r.status !== 201) return false;
        after = r.body.id as string;
        return (await getRecord(direct, shardKeys(svc.prefix, 'orders', 0), expireJobId(after))) !== null;
      },
      15_000,
      250,
    );
    expect(scheduled, 'an order made after the socket timeout gets its expiry job').toBe(true);

    // The flusher, whose connection went silent too, flushes again: a parcel
    // alone in its area is batched at its maximum wait.
    const tracking = `OUT-S-${randomUUID().slice(0, 8)}`;
    await svc.api().post('/parcels').send({ trackingNo: tracking, area: 'OUT-A' }).expect(202);
    const batched = await waitFor(
      async () => (await tdb.db.parcel.findUnique({ where: { client_trackingNo: { client: 'default', trackingNo: tracking } } }))?.status === 'BATCHED',
      15_000,
      100,
    );
    expect(batched, 'a parcel posted after the silence is batched by the flusher').toBe(true);
  });
});
