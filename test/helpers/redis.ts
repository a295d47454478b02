// Test access to Redis: the real local server, or the test Redis Cluster when
// TEST_REDIS_CLUSTER_NODES is set (vitest.cluster.config.ts starts one), one
// client per test file and a unique queue name per test so files can run in
// parallel without seeing each other.
import { randomBytes } from 'node:crypto';
import { type RedisClient, createRedis, masters } from '../../src/core/redis.js';

export const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
/** "host:port,..." of the test cluster, or undefined on a single server. */
export const CLUSTER_SEEDS = process.env.TEST_REDIS_CLUSTER_NODES || undefined;

/** The environment a service under test needs to reach the same Redis as the test. */
export const REDIS_ENV: Record<string, string> = CLUSTER_SEEDS ? { REDIS_URL, REDIS_CLUSTER_NODES: CLUSTER_SEEDS } : { REDIS_URL };

export function redisClient(name = 'test'): RedisClient {
  const clusterNodes = CLUSTER_SEEDS?.split(',').map((s) => ({ host: s.slice(0, s.lastIndexOf(':')), port: Number(s.slice(s.lastIndexOf(':') + 1)) }));
  return createRedis({ url: REDIS_URL, clusterNodes }, name);
}

export function uniqueQueueName(tag: string): string {
  return `t-${tag}-${randomBytes(4).toString('hex')}`.toLowerCase();
}

/** Deletes every key of the queue's shards (tests only: SCAN is fine here). */
export async function dropQueue(redis: RedisClient, name: string, prefix = 'dq'): Promise<void> {
  await dropMatching(redis, `${prefix}:{${name}:*`);
}

/** Deletes every key under a queue key prefix (tests only). */
export async function dropPrefix(redis: RedisClient, prefix: string): Promise<void> {
  await dropMatching(redis, `${prefix}:*`);
}

/** SCAN on every master, then UNLINK key by key: on a cluster one command may not span slots. */
async function dropMatching(redis: RedisClient, match: string): Promise<void> {
  if (CLUSTER_SEEDS) await redis.ping(); // the node list is known once the cluster answered
  for (const node of masters(redis)) {
    const stream = node.scanStream({ match, count: 1000 });
    for await (const keys of stream as AsyncIterable<string[]>) {
      if (keys.length === 0) continue;
      const p = node.pipeline();
      for (const k of keys) p.unlink(k);
      await p.exec();
    }
  }
}

/** The Redis server clock in whole ms, the clock every script decides by. */
export async function redisNowMs(redis: RedisClient): Promise<number> {
  const [s, us] = await redis.time();
  return Number(s) * 1000 + Math.floor(Number(us) / 1000);
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Polls `check` until it returns true or the deadline passes; returns the last result. */
export async function waitFor(check: () => Promise<boolean> | boolean, timeoutMs: number, everyMs = 10): Promise<boolean> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return true;
    if (Date.now() > end) return false;
    await sleep(everyMs);
  }
}
