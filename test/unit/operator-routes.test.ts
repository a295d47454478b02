// The operators' tables keep their one safe order (src/composition/operator-routes.ts):
// the dashboard page answers without a token, everything else under /admin
// only with the admin token.
import type { ApiKeyStore } from '../../src/core/auth/api-keys.js';
import request from 'supertest';
import { afterAll, describe, expect, it } from 'vitest';
import { createApp } from '../../src/app.js';
import { operatorRoutes } from '../../src/composition/operator-routes.js';
import { createLogger } from '../../src/core/logger.js';
import { createQueue } from '../../src/queue/index.js';
import { dropQueue, redisClient, uniqueQueueName } from '../helpers/redis.js';

const TOKEN = 'operator-routes-test-token';
const redis = redisClient('operator-routes-test');
const name = uniqueQueueName('ops');
afterAll(async () => {
  await dropQueue(redis, name);
  redis.disconnect();
});

// The routes below never reach the API keys' table.
const notUsed = () => Promise.reject(new Error('not used by this test'));
const keysNotUsedHere: ApiKeyStore = { create: notUsed, list: notUsed, revoke: notUsed, any: notUsed, verify: notUsed, touch: notUsed };

const app = createApp({
  log: createLogger('silent'),
  redis,
  routes: operatorRoutes({
    queues: [createQueue(redis, { name, types: { t: {} } })],
    token: TOKEN,
    keys: keysNotUsedHere,
    secrets: { create: notUsed, list: notUsed, remove: notUsed, keysFor: notUsed },
    lateness: { read: async () => [] },
    recentBatches: async () => [],
    dailyReports: async () => [],
  }),
});

describe('operator routes', () => {
  it('serve the dashboard page to anyone and the admin API only with the token', async () => {
    expect((await request(app).get('/admin/dashboard')).status).toBe(200);
    expect((await request(app).get('/admin/queues')).status).toBe(401);
    expect((await request(app).get('/admin/queues').set('authorization', `Bearer ${TOKEN}`)).status).toBe(200);
    expect((await request(app).get('/admin/anything-else')).status).toBe(401);
  });
});
