// The Redis Sentinel suite (npm run test:sentinel): test/sentinel/*.test.ts, one
// file at a time, as each starts its own master, replica and three sentinels
// (redis-server --sentinel) and fails them over; the default suite leaves them out.
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/sentinel/**/*.test.ts'],
    pool: 'forks',
    fileParallelism: false,
    testTimeout: 180_000,
    hookTimeout: 120_000,
  },
});
