// Start-up steps that talk to Redis: a process started while Redis blinks
// (hung, restarting, failing over) waits it out instead of exiting.
import type { Logger } from '../core/logger.js';
import { isRedisUnavailable } from '../core/redis-call.js';

/** How long start-up waits for Redis. */
export const REDIS_START_TIMEOUT_MS = 30_000;

/** Runs `step`, again while Redis is unavailable (its commands fail at once), for up to REDIS_START_TIMEOUT_MS. */
export async function duringStartUp<T>(step: () => Promise<T>, what: string, log: Logger): Promise<T> {
  for (const started = Date.now(); ;) {
    try {
      return await step();
    } catch (err) {
      if (!isRedisUnavailable(err) || Date.now() - started > REDIS_START_TIMEOUT_MS) throw err;
      log.warn({ err }, `${what}: Redis unavailable; retrying`);
      await new Promise((r) => setTimeout(r, 250));
    }
  }
}
