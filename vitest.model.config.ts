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
    // Past the soak's own limit (MODEL_TIME_LIMIT_MS, default 20 min), with
    // time to shrink and report: a timeout here would tear the world down
    // under a run still going (seen as "database does not exist").
    testTimeout: Number(process.env.MODEL_TIME_LIMIT_MS ?? 20 * 60_000) + 15 * 60_000,
    hookTimeout: 180_000,
  },
});
