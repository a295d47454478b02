// The service's Redis hangs mid-load (SIGSTOP: its connections stay open and
// nothing answers), twice, 3 s each time, then goes on (SIGCONT). Redis keeps
// its data. While it hangs the API keeps answering (PostgreSQL holds the
// truth); what was sent to Redis during the hang must change nothing after it
// (the claims and batch takes are past their deadlines), nothing may be lost or
// done twice, and the work that fell due meanwhile must be done soon after
// (the recovery times are printed with the scenario's line).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sleep } from '../helpers/redis.js';
import { type PrivateRedis, startPrivateRedis } from '../helpers/redis-server.js';
import { recoveryAfter } from './evidence.js';
import { type Scenario, startScenario } from './scenario.js';

const HANG_MS = 3_000;
// Work that fell due during a hang is done within this after it ends (the
// connections are ended by the socket timeout and reopened, the claims run).
const RECOVERY_MS = 5_000;

let server: PrivateRedis;
let s: Scenario;

beforeAll(async () => {
  server = await startPrivateRedis();
  s = await startScenario({ name: 'redis-hang', workers: 2, redisUrl: server.url });
});
afterAll(async () => {
  server?.resume();
  await s?.close();
  await server?.stop();
});

describe('Redis hung mid-load', () => {
  it('answers through the hang, runs nothing stale after it, and catches up', async () => {
    const backAt: { fault: string; at: number }[] = [];
    const chaos = async () => {
      for (const at of [4_000, 10_000]) {
        await sleep(at === 4_000 ? at : 3_000);
        server.pause();
        await sleep(HANG_MS);
        server.resume();
        backAt.push({ fault: `redis hung ${HANG_MS} ms`, at: Date.now() });
      }
      return { backAt };
    };
    const { records, faults } = await s.drive(chaos);
    await s.settleAndCheck(records, faults);
    // Recovery: printed with the scenario's line; the first effect after each hang comes quickly.
    for (const b of backAt) {
      const r = await recoveryAfter(s.tdb.db, b.fault, b.at);
      expect(r.firstEffectMs, `${b.fault}: first effect after it`).not.toBeNull();
      expect(r.firstEffectMs!, `${b.fault}: first effect after it`).toBeLessThan(RECOVERY_MS);
    }
  });
});
