import { configDefaults, defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Cluster-only files run in the cluster suite (vitest.cluster.config.ts), the
    // fault-injection suite on its own (npm run test:chaos, vitest.chaos.config.ts).
    exclude: [...configDefaults.exclude, 'test/cluster/**', 'test/chaos/**'],
    pool: 'forks',
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Files use their own queue names and key prefixes, so they may run side by side.
    fileParallelism: true,
  },
});
