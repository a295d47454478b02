// Runs the whole service in-process for a test: its own database, its own
// queue key prefix (so files run side by side), silent logs.
import { randomBytes } from 'node:crypto';
import request, { type Agent as TestAgent } from 'supertest';
import { apiKeyStore } from '../../src/core/auth/api-keys.js';
import { SCOPES, type Scope } from '../../src/core/auth/scopes.js';
import { DEFAULT_CLIENT } from '../../src/core/auth/api-key-input.js';
import { createDb } from '../../src/core/db.js';
import { loadConfig } from '../../src/config.js';
import { batcherPrefix } from '../../src/queue/index.js';
import { createLogger } from '../../src/core/logger.js';
import { type Role, type RunningService, startService } from '../../src/service.js';
import { REDIS_ENV, dropPrefix, redisClient } from './redis.js';

export type TestService = RunningService & {
  url: string;
  prefix: string;
  /** An API key with every scope, made for this service. */
  key: string;
  /** A supertest agent on the service that sends that key with every request. */
  api(): TestAgent;
};

/** Makes an API key in the database at `databaseUrl` (every scope unless told). */
export async function makeApiKey(
  databaseUrl: string,
  scopes: readonly Scope[] = SCOPES,
  name = 'test',
  client = DEFAULT_CLIENT,
): Promise<{ id: string; key: string }> {
  const db = createDb(databaseUrl, 1);
  try {
    const k = await apiKeyStore(db).create(name, scopes, client);
    return { id: k.id, key: k.key };
  } finally {
    await db.$disconnect();
  }
}

/** Headers of a request made with `key` (for fetch-based clients). */
export const bearer = (key: string) => ({ authorization: `Bearer ${key}` });

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
    // The record groups, the default of the next release (this one writes the one HASH by default).
    QUEUE_RECORD_GROUPS: '1',
    // Tests book many reminders for few contacts; the limit's own test sets it low.
    REMINDERS_PER_CONTACT_PER_HOUR: '100000',
    // The service shares its event loop with the test runner, which blocks it
    // for its own work (a document's lint, a load's set-up): shedding would
    // answer 503 for the runner's pauses. Its own test turns it on.
    API_SHED_EVENT_LOOP_DELAY_MS: '0',
    ...env,
    QUEUE_PREFIX: prefix,
  });
  const s = await startService(config, role, createLogger(config.LOG_LEVEL));
  const url = `http://127.0.0.1:${s.port}`;
  const { key } = role === 'worker' ? { key: '' } : await makeApiKey(databaseUrl);
  return { ...s, url, prefix, key, api: () => request.agent(url).set(bearer(key)) };
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
