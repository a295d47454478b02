// The model-based suites (test/model/*.model.test.ts): each starts its own
// world (service processes, Redis, a database, a receiver) and runs many
// generated command sequences against it, one file at a time. `npm test` runs
// them with their CI run counts; `npm run test:soak` with many more.
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/model/**/*.model.test.ts'],
    pool: 'forks',
    fileParallelism: false,
    testTimeout: 30 * 60_000,
    hookTimeout: 180_000,
  },
});
