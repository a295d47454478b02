// Worker processes killed with SIGKILL at random moments while orders expire,
// reminders fire and parcels flush, each started again a moment later. The
// orders and appointments reconciliation passes are off (one pass at start):
// leases alone must bring a dead worker's jobs back. The parcels pass stays on,
// as it is the designed repair of a batch taken out of Redis by a worker that
// died before committing it; the notification relay too, for a row committed
// by a worker that died before handing it to delivery.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REDIS_URL, sleep } from '../helpers/redis.js';
import { rand, sleepUntil } from './drivers/http.js';
import { NO_DOMAIN_RECONCILE, type Scenario, startScenario } from './scenario.js';

const WORKERS = 3;
// A job still leased this long after its worker was killed is held by the dead
// worker (a live one finishes these handlers within milliseconds).
const ORPHAN_AFTER_MS = 300;

let s: Scenario;

beforeAll(async () => {
  s = await startScenario({ name: 'worker-kill', workers: WORKERS, redisUrl: REDIS_URL, env: { ...NO_DOMAIN_RECONCILE } });
});
afterAll(async () => s?.close());

/**
 * Every 0.5-1.5 s, at a moment work falls due (an announced deadline + 0-30 ms,
 * when a worker most likely holds jobs), kills one or two of the running
 * workers and starts each again 0.2-1 s later, until told to stop. Counts the
 * jobs the dead workers were holding.
 */
async function killLoop(dueTimes: readonly number[], stopped: () => boolean) {
  const down = new Set<number>();
  const restarts: Promise<void>[] = [];
  const leased = new Set<string>();
  let kills = 0;
  while (!stopped()) {
    await sleep(rand(500, 1_500));
    const now = Date.now();
    const target = dueTimes.filter((t) => t > now + 50 && t < now + 3_000).sort((a, b) => a - b)[0];
    if (target !== undefined) await sleepUntil(target + rand(0, 30));
    const up = Array.from({ length: WORKERS }, (_, i) => i).filter((i) => !down.has(i));
    if (stopped() || up.length === 0) continue;
    const victims = up.sort(() => Math.random() - 0.5).slice(0, Math.random() < 0.5 ? 1 : 2);
    for (const i of victims) down.add(i);
    await Promise.all(victims.map((i) => s.killWorker(i)));
    kills += victims.length;
    restarts.push(
      ...victims.map(async (i) => {
        await sleep(rand(200, 1_000));
        await s.restartWorker(i);
        down.delete(i);
      }),
    );
    await sleep(ORPHAN_AFTER_MS);
    for (const id of await s.jobsInFlight()) leased.add(id);
  }
  await Promise.all(restarts);
  return { kills, leasedAfterKill: leased.size };
}

describe('workers killed with SIGKILL under load', () => {
  it('loses no order, reminder or parcel and does none twice', async () => {
    const dueTimes: number[] = [];
    const { records, faults } = await s.drive(
      (loadDone) => killLoop(dueTimes, loadDone),
      (at) => dueTimes.push(at),
    );
    await s.settleAndCheck(records, faults);
    // The kills hit work in progress: dead workers held jobs, which came back after their lease.
    expect(faults.leasedAfterKill).toBeGreaterThan(0);
  });
});
