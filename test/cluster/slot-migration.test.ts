// Cluster only (vitest.cluster.config.ts): a queue shard's slot moves to another
// master while jobs are being scheduled, claimed and acked, and while orders
// expire through the whole service. Clients follow ASK / TRYAGAIN / MOVED;
// every job runs once and every order is cancelled once.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { masters } from '../../src/core/redis.js';
import type { Queue } from '../../src/queue/producer/queue.js';
import { createTestDb, type TestDb } from '../helpers/db.js';
import { type Harness, harness } from '../helpers/queues.js';
import { type TestCluster, migrateSlot } from '../helpers/redis-cluster.js';
import { CLUSTER_SEEDS, redisClient, sleep, waitFor } from '../helpers/redis.js';
import { startTestService, stopTestService, type TestService } from '../helpers/service.js';

const SEEDS: string = CLUSTER_SEEDS ?? fail('run with vitest.cluster.config.ts: this file needs the test cluster');

function fail(message: string): never {
  throw new Error(message);
}

/** MOVED + ASK + TRYAGAIN redirections the masters answered so far. */
async function redirections(cluster: TestCluster & { ready: Promise<unknown> }): Promise<number> {
  await cluster.ready;
  let n = 0;
  for (const node of cluster.nodes) {
    const stats = (await cluster.node(node.port).info('errorstats')) as string;
    for (const kind of ['MOVED', 'ASK', 'TRYAGAIN']) n += Number(new RegExp(`errorstat_${kind}:count=(\\d+)`).exec(stats)?.[1] ?? 0);
  }
  return n;
}

/** The test cluster's nodes, reached directly (the helpers' client hides them). */
function clusterOf(seeds: string): TestCluster & { ready: Promise<unknown> } {
  const client = redisClient('slot-migration-admin');
  const nodes = seeds.split(',').map((s) => ({ host: '127.0.0.1', port: Number(s.split(':')[1]) }));
  return {
    nodes,
    seeds,
    node: (port) => {
      const m = masters(client).find((n) => n.options.port === port);
      if (!m) throw new Error(`no master on ${port}`);
      return m;
    },
    stop: async () => client.disconnect(),
    // Its node list is known once the cluster answered.
    ready: client.ping(),
  };
}

/** Moves the slot of `key` to a master that does not hold it now. */
async function moveSlotOf(cluster: TestCluster & { ready: Promise<unknown> }, key: string): Promise<{ slot: number; from: number; to: number; keys: number }> {
  await cluster.ready;
  const any = cluster.node(cluster.nodes[0]!.port);
  const slot = Number(await any.cluster('KEYSLOT', key));
  const slots = await any.cluster('SLOTS');
  const owner = slots.find(([lo, hi]) => slot >= lo && slot <= hi)?.[2]?.[1];
  const to = cluster.nodes.find((n) => n.port !== owner)!.port;
  const r = await migrateSlot(cluster, slot, to);
  return { slot, from: r.from, to, keys: r.keys };
}

describe('a queue shard moving between masters', () => {
  let cluster: ReturnType<typeof clusterOf>;
  let h: Harness;
  beforeAll(async () => {
    cluster = clusterOf(SEEDS);
  });
  afterAll(async () => {
    await h?.close();
    await cluster?.stop();
  });

  it('runs every job once while its slot migrates mid-load', async () => {
    h = harness('migrate', { t: {} });
    await h.redis.ping();
    const seen = new Map<string, number>();
    await h.startWorker({ t: (job) => void seen.set(job.id, (seen.get(job.id) ?? 0) + 1) }, { concurrency: 20 });
    await h.startWorker({ t: (job) => void seen.set(job.id, (seen.get(job.id) ?? 0) + 1) }, { concurrency: 20 });
    const N = 3_000;
    // Jobs due over ~3 s, scheduled in waves while the slot moves.
    const waves = 30;
    const producing = (async () => {
      for (let w = 0; w < waves; w++) {
        const jobs = Array.from({ length: N / waves }, (_, i) => ({ id: `j${w}-${i}`, type: 't', delayMs: Math.floor(Math.random() * 1_000) }));
        await h.queue.scheduleMany(jobs);
        await sleep(100);
      }
    })();
    await sleep(1_000);
    const before = await redirections(cluster);
    const moved = await moveSlotOf(cluster, h.queue.keys[0]!.due);
    expect(moved.keys).toBeGreaterThan(0);
    await producing;
    // The clients really were sent elsewhere (and followed).
    expect(await redirections(cluster)).toBeGreaterThan(before);
    expect(await waitFor(() => seen.size === N, 20_000, 50)).toBe(true);
    expect([...seen.values()].filter((c) => c !== 1)).toEqual([]);
    expect(await h.queue.stats()).toMatchObject({ pending: 0, inFlight: 0, dead: 0 });
  });
});

describe('orders expiring while their queue shard moves', () => {
  let tdb: TestDb;
  let svc: TestService;
  let cluster: ReturnType<typeof clusterOf>;
  beforeAll(async () => {
    cluster = clusterOf(SEEDS);
    tdb = await createTestDb('slot_migration');
    svc = await startTestService(tdb.url, { ORDER_RECONCILE_INTERVAL_SECONDS: '3600', QUEUE_SHARDS: '2' });
  });
  afterAll(async () => {
    await stopTestService(svc, tdb);
    await cluster?.stop();
  });

  it('cancels each unpaid order once, with one notification', async () => {
    const orders = svc.module('orders').queue as Queue;
    const body = { customerId: 'c', items: [{ sku: 's', quantity: 1, unitPriceCents: 100 }], paymentTimeoutSeconds: 3 };
    const created = await Promise.all(Array.from({ length: 60 }, () => svc.api().post('/orders').send(body)));
    expect(created.map((r) => r.status)).toEqual(Array(60).fill(201));
    const ids = created.map((r) => r.body.id as string);
    const firstExpiry = Math.min(...created.map((r) => Date.parse(r.body.expiresAt)));
    // One shard moves while the expiries are still pending, the other while they fire.
    expect(Date.now()).toBeLessThan(firstExpiry);
    await moveSlotOf(cluster, orders.keys[0]!.due);
    await sleep(Math.max(0, firstExpiry - Date.now()));
    await moveSlotOf(cluster, orders.keys[1]!.due);
    expect(await waitFor(async () => (await tdb.db.order.count({ where: { id: { in: ids }, status: 'CANCELLED' } })) === ids.length, 15_000, 100)).toBe(true);
    const notes = await tdb.db.notification.groupBy({ by: ['orderId'], where: { orderId: { in: ids } }, _count: true });
    expect(notes).toHaveLength(ids.length);
    expect(notes.every((n) => n._count === 1)).toBe(true);
  });
});
