// The service's Redis (a private redis-server with appendonly yes, appendfsync
// everysec) restarted twice mid-load, each time started again on the same
// port and directory 1.5 s later: once shut down with SHUTDOWN NOSAVE (the AOF
// is flushed on the way down: nothing is lost), once killed with SIGKILL with
// the last second of its AOF cut off before the restart. (A killed process
// loses nothing the OS has; the cut stands for a host crash, which loses the
// writes since the last everysec fsync, acknowledged or not.) Everything
// committed in PostgreSQL must still reach its end state: what Redis kept runs
// on, what it lost the reconciliation passes re-create from the database.
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sleep } from '../helpers/redis.js';
import { type PrivateRedis, startPrivateRedis } from '../helpers/redis-server.js';
import { type Scenario, startScenario } from './scenario.js';

const DOWN_MS = 1_500;
// appendfsync everysec: a crash loses up to about this much of the latest writes.
const FSYNC_WINDOW_MS = 1_000;
let server: PrivateRedis;
let s: Scenario;

beforeAll(async () => {
  server = await startPrivateRedis([], { aof: true });
  s = await startScenario({ name: 'redis-restart', workers: 2, redisUrl: server.url });
});
afterAll(async () => {
  await s?.close();
  await server?.stop();
});

type Restart = { how: string; keysBefore: number; keysAfter: number; aofBytesDropped: number };

/** The AOF's size every 50 ms, to know what it was one fsync window before a crash. */
function sampleAof(): { sizeAt(t: number): number; stop(): void } {
  const samples: { t: number; bytes: number }[] = [];
  const timer = setInterval(() => samples.push({ t: Date.now(), bytes: server.aofBytes() }), 50);
  return {
    sizeAt: (t) => samples.filter((x) => x.t <= t).at(-1)?.bytes ?? 0,
    stop: () => clearInterval(timer),
  };
}

/**
 * Stops Redis the given way, keeps it down DOWN_MS, starts it again; counts its
 * keys around it. A crash also loses the AOF's last fsync window.
 */
async function restart(how: 'SHUTDOWN NOSAVE' | 'crash', aof: ReturnType<typeof sampleAof>): Promise<Restart> {
  const keys = async () => {
    const c = new Redis(server.url, { lazyConnect: true, maxRetriesPerRequest: 0 });
    try {
      await c.connect();
      return await c.dbsize();
    } finally {
      c.disconnect();
    }
  };
  const keysBefore = await keys();
  let aofBytesDropped = 0;
  if (how === 'crash') {
    await server.kill();
    const kept = aof.sizeAt(Date.now() - FSYNC_WINDOW_MS);
    aofBytesDropped = server.aofBytes() - kept;
    server.truncateAof(kept);
  } else {
    await server.shutdownNoSave();
  }
  await sleep(DOWN_MS);
  await server.restart();
  return { how: how === 'crash' ? 'SIGKILL, last second of the AOF cut' : how, keysBefore, keysAfter: await keys(), aofBytesDropped };
}

describe('Redis restarted mid-load', () => {
  it('loses nothing PostgreSQL committed and does nothing twice', async () => {
    const restarts: Restart[] = [];
    const backAt: { fault: string; at: number }[] = [];
    const chaos = async () => {
      const aof = sampleAof();
      try {
        await sleep(5_000);
        restarts.push(await restart('SHUTDOWN NOSAVE', aof));
        backAt.push({ fault: 'redis shutdown', at: Date.now() });
        await sleep(5_000);
        restarts.push(await restart('crash', aof));
        backAt.push({ fault: 'redis crash', at: Date.now() });
      } finally {
        aof.stop();
      }
    };
    const { records } = await s.drive(chaos);
    await s.settleAndCheck(records, { restarts, backAt });
    // Persistence was on: the restarted server came back with the queues' keys,
    // and the crash did cut writes off.
    for (const r of restarts) expect(r.keysAfter, `${r.how}: keys after the restart`).toBeGreaterThan(0);
    expect(restarts[1]?.aofBytesDropped).toBeGreaterThan(0);
  });
});
