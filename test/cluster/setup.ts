// Global setup of the cluster suite (vitest.cluster.config.ts): one real
// 3-master Redis Cluster for every file, its seeds handed to the helpers (and
// to child processes) through TEST_REDIS_CLUSTER_NODES, with 4 queue shards. At teardown, no master
// may have answered a single CROSSSLOT error: every script and command of the
// engine and the domains touched one slot.
import { type TestCluster, startRedisCluster } from '../helpers/redis-cluster.js';

let cluster: TestCluster | undefined;

export async function setup(): Promise<void> {
  cluster = await startRedisCluster(3);
  process.env.TEST_REDIS_CLUSTER_NODES = cluster.seeds;
  // Services under test split each queue and the parcel areas over 4 shards,
  // so one queue's work lands on several masters.
  process.env.TEST_QUEUE_SHARDS = '4';
}

export async function teardown(): Promise<void> {
  if (!cluster) return;
  try {
    const counts = await Promise.all(
      cluster.nodes.map(async (n) => {
        const stats = (await cluster!.node(n.port).info('errorstats')) as string;
        return Number(/errorstat_CROSSSLOT:count=(\d+)/.exec(stats)?.[1] ?? 0);
      }),
    );
    const total = counts.reduce((a, b) => a + b, 0);
    if (total > 0) {
      // vitest reports a teardown error but does not fail the run for it.
      process.exitCode = 1;
      throw new Error(`the cluster answered ${total} CROSSSLOT errors (per master: ${counts.join(', ')})`);
    }
  } finally {
    await cluster.stop();
  }
}
