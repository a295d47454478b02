import { configDefaults, defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Cluster-only files run in the cluster suite (vitest.cluster.config.ts), the
    // model-based suites, the Sentinel suite and the fault-injection suite each
    // on their own (vitest.model.config.ts, vitest.sentinel.config.ts, vitest.chaos.config.ts).
    exclude: [...configDefaults.exclude, 'test/cluster/**', 'test/chaos/**', 'test/model/**', 'test/sentinel/**'],
    pool: 'forks',
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Files use their own queue names and key prefixes, so they may run side by side.
    fileParallelism: true,
  },
});
