// The fault-injection suite (npm run test:chaos): test/chaos/*.chaos.test.ts,
// one file at a time, as each starts several service processes and servers.
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/chaos/**/*.chaos.test.ts'],
    pool: 'forks',
    fileParallelism: false,
    testTimeout: 180_000,
    hookTimeout: 120_000,
  },
});
