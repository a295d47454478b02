import { defineConfig } from 'vitest/config';

// The queue and domain suites again, on a real 3-master Redis Cluster started
// by test/cluster/setup.ts (with QUEUE_SHARDS > 1 where a file sets it), plus
// the cluster-only tests (slot migration). Files that need one plain server
// (CLIENT KILL, a private server, database indexes, FLUSHALL) stay out.
export default defineConfig({
  test: {
    include: [
      'test/lua/*.test.ts',
      'test/integration/queue/worker.{delivery,retry,lease,shutdown,crash,fairness}.test.ts',
      'test/integration/queue/periodic.test.ts',
      'test/integration/queue/reshard{,-copy}.test.ts',
      'test/integration/orders/orders.reshard.test.ts',
      'test/integration/{orders,appointments,parcels}/*.api.test.ts',
      'test/integration/{orders,appointments}/*.race.test.ts',
      'test/integration/admin/admin.api.test.ts',
      'test/integration/notifications/notifications.webhook.test.ts',
      'test/cluster/*.test.ts',
    ],
    globalSetup: ['test/cluster/setup.ts'],
    pool: 'forks',
    testTimeout: 60_000,
    hookTimeout: 60_000,
    fileParallelism: true,
  },
});
