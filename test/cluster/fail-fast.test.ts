// Regression test (found by an adversarial review, 2026-11-23). Before the fix: on a Redis Cluster the fail-fast settings of
// src/core/redis.ts do not hold. ioredis' Cluster forces enableOfflineQueue on
// and retryStrategy off for its node connections, keeps its own offline queue,
// and retries a command whose node connection closed ("Connection is closed.")
// up to maxRedirections (200) times. A command sent while a master hangs is
// written again on each new connection (each dies by the socket timeout), and
// every copy runs when the master wakes: long after its caller gave up, and
// more than once.
import { execFileSync } from 'node:child_process';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createRedis, type RedisClient } from '../../src/core/redis.js';
import { redisCall } from '../../src/core/redis-call.js';
import { sleep, waitFor } from '../helpers/redis.js';
import { startRedisCluster, type TestCluster } from '../helpers/redis-cluster.js';

let cluster: TestCluster;
let client: RedisClient;
let pid = 0;

beforeAll(async () => {
  cluster = await startRedisCluster(3);
  const nodes = cluster.nodes.map((n) => ({ host: n.host, port: n.port }));
  client = createRedis({ url: 'redis://127.0.0.1', clusterNodes: nodes, socketTimeoutMs: 1_000 }, 'adv-cluster');
  await client.ping();
}, 60_000);
afterAll(async () => {
  if (pid) process.kill(pid, 'SIGCONT');
  client?.disconnect();
  await cluster?.stop();
});

it('a command given up on during a master hang runs once, or not at all', async () => {
  const key = 'adv:{k}';
  const slot = Number(await cluster.node(cluster.nodes[0]!.port).cluster('KEYSLOT', key));
  const ranges = (await cluster.node(cluster.nodes[0]!.port).cluster('SLOTS')) as unknown as [number, number, [string, number]][];
  const port = ranges.find(([lo, hi]) => slot >= lo && slot <= hi)![2][1];
  const owner = cluster.node(port);
  pid = Number(/process_id:(\d+)/.exec((await owner.info('server')) as string)![1]);

  process.kill(pid, 'SIGSTOP');
  const t0 = Date.now();
  const outcome = await redisCall(client.incr(key), 'incr').then(
    (v) => `answered ${v}`,
    (e: Error) => `caller gave up after ${Date.now() - t0} ms: ${e.message}`,
  );
  await sleep(Number(process.env.ADV_HANG ?? 8_000)); // the master hangs
  const clusterQueue = (client as unknown as { offlineQueue: { length: number } }).offlineQueue.length;
  process.kill(pid, 'SIGCONT');
  pid = 0;
  await waitFor(async () => (await owner.ping()) === 'PONG', 5_000);
  await sleep(3_000);
  const value = Number(await owner.get(key));
  const conns = execFileSync('redis-cli', ['-p', String(port), 'info', 'stats'])
    .toString()
    .match(/total_connections_received:(\d+)/)?.[1];
  console.log(JSON.stringify({ outcome, ranTimes: value, clusterQueue, connectionsToHungMaster: conns }));
  expect(outcome).toMatch(/caller gave up/);
  expect(value).toBeLessThanOrEqual(1);
}, 60_000);
