// Runs the whole service in-process for a test: its own database, its own
// queue key prefix (so files run side by side), silent logs.
import { randomBytes } from 'node:crypto';
import { loadConfig } from '../../src/config.js';
import { batcherPrefix } from '../../src/queue/index.js';
import { createLogger } from '../../src/core/logger.js';
import { type Role, type RunningService, startService } from '../../src/service.js';
import { REDIS_ENV, dropPrefix, redisClient } from './redis.js';

export type TestService = RunningService & { url: string; prefix: string };

export async function startTestService(databaseUrl: string, env: Record<string, string> = {}, role: Role = 'all'): Promise<TestService> {
  const prefix = env.QUEUE_PREFIX ?? `t${randomBytes(4).toString('hex')}`;
  const config = loadConfig({
    ...REDIS_ENV,
    DATABASE_URL: databaseUrl,
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    DATABASE_POOL_SIZE: '5',
    // The cluster suite spreads every queue and the parcel areas over shards.
    QUEUE_SHARDS: process.env.TEST_QUEUE_SHARDS ?? '1',
    ...env,
    QUEUE_PREFIX: prefix,
  });
  const s = await startService(config, role, createLogger(config.LOG_LEVEL));
  return { ...s, url: `http://127.0.0.1:${s.port}`, prefix };
}

/**
 * Stops a test service, deletes every Redis key it made (its queues' and its
 * batchers') and drops its database (each may be missing after a failed start).
 */
export async function stopTestService(svc: TestService | undefined, tdb?: { drop(): Promise<void> }): Promise<void> {
  await svc?.stop();
  if (svc) await dropServiceKeys(svc.prefix);
  await tdb?.drop();
}

/** Deletes the Redis keys of a service run under `prefix`: its queues' and its batchers'. */
export async function dropServiceKeys(prefix: string): Promise<void> {
  const r = redisClient('test-cleanup');
  try {
    for (const p of [prefix, batcherPrefix(prefix)]) await dropPrefix(r, p);
  } finally {
    r.disconnect();
  }
}
