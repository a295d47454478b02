// Network blips between the service and Redis: the service reaches a private
// redis-server through a TCP proxy that, mid-load, resets every connection,
// delays all data by 300 ms each way for 3 s, cuts the link (resets, then
// refuses connections for 2 s) and delays data by 1 s each way for 2 s (a
// round trip longer than the 1.5 s lease: jobs are handed out again while
// their first delivery still runs). Redis itself keeps its data. No job may be
// lost or take effect twice: one cancellation per order, one reminder per
// slot, every parcel in one batch. A repeated delivery of the same
// notification (same Idempotency-Key, for the receiver to drop) is counted as
// `resent`, not as a duplicate.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sleep } from '../helpers/redis.js';
import { type PrivateRedis, startPrivateRedis } from '../helpers/redis-server.js';
import { type TcpProxy, startTcpProxy } from '../helpers/tcp-proxy.js';
import { type Scenario, startScenario } from './scenario.js';

let server: PrivateRedis;
let proxy: TcpProxy;
let s: Scenario;

beforeAll(async () => {
  server = await startPrivateRedis();
  proxy = await startTcpProxy({ port: server.port });
  s = await startScenario({ name: 'redis-blip', workers: 2, redisUrl: server.url, serviceRedisUrl: `redis://127.0.0.1:${proxy.port}` });
});
afterAll(async () => {
  await s?.close();
  await proxy?.close();
  await server?.stop();
});

async function delayFor(ms: number, forMs: number): Promise<void> {
  proxy.delay(ms);
  await sleep(forMs);
  proxy.delay(0);
}

describe('network blips between the service and Redis', () => {
  it('loses no job and runs none twice to effect', async () => {
    const blips = async () => {
      const log: Record<string, number>[] = [];
      await sleep(3_000);
      log.push({ atMs: 3_000, reset: proxy.dropAll() });
      await sleep(2_000);
      await delayFor(300, 3_000);
      await sleep(1_000);
      log.push({ atMs: 9_000, reset: proxy.dropAll() });
      await proxy.refuse(2_000);
      const cutEnded = Date.now();
      await sleep(1_000);
      await delayFor(1_000, 2_000);
      return {
        blips: log,
        connections: proxy.stats(),
        backAt: [
          { fault: 'redis link cut', at: cutEnded },
          { fault: 'redis link delayed 1 s', at: Date.now() },
        ],
      };
    };
    const { records, faults } = await s.drive(blips);
    const evidence = await s.settleAndCheck(records, faults);
    // The blips reached the service: its connections were re-opened.
    expect(faults.connections.accepted).toBeGreaterThan(faults.connections.open);
    expect(evidence.logged['wake subscriber reconnected; re-checking all shards'] ?? 0).toBeGreaterThan(0);
  });
});
