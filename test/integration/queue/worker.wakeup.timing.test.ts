// Timing-sensitive: run alone after the other files (see "test" in package.json),
// so a busy neighbour test cannot eat the 20 ms budget on a 2-core machine.
// Wake-up without polling: a sleeping worker starts a newly scheduled earlier
// job on time, and survives its connections being killed while idle.
import { afterEach, describe, expect, it } from 'vitest';
import { type RedisClient, masters } from '../../../src/core/redis.js';
import { type Harness, harness } from '../../helpers/queues.js';
import { sleep, waitFor } from '../../helpers/redis.js';

let h: Harness;
afterEach(async () => h?.close());

async function killClients(admin: RedisClient, name: string): Promise<number> {
  let killed = 0;
  for (const node of masters(admin)) {
    const list = await node.client('LIST');
    const ids = String(list)
      .split('\n')
      .filter((line) => line.includes(` name=${name} `))
      .map((line) => /\bid=(\d+)/.exec(line)?.[1])
      .filter((id): id is string => id !== undefined);
    for (const id of ids) await node.client('KILL', 'ID', id);
    killed += ids.length;
  }
  return killed;
}

describe('wake-up', () => {
  it('starts a job scheduled 50 ms ahead within 20 ms of its due time while asleep on a head 10 minutes away', async () => {
    h = harness('wake', { t: {} });
    await h.queue.schedule({ id: 'far', type: 't', delayMs: 10 * 60_000 });
    const lateness: number[] = [];
    await h.startWorker({ t: (job) => void lateness.push(Date.now() - job.dueAt) }, { idleRecheckMs: 5_000 });
    await sleep(300); // the worker is now asleep until the idle re-check
    await h.queue.schedule({ id: 'near', type: 't', delayMs: 50 });
    expect(await waitFor(() => lateness.length === 1, 2_000, 2)).toBe(true);
    expect(lateness[0]).toBeGreaterThanOrEqual(0);
    expect(lateness[0]).toBeLessThanOrEqual(20);
  });

  it('resumes after its Redis connections are killed while idle and still meets due times', async () => {
    h = harness('drop', { t: {} });
    const lateness: number[] = [];
    await h.startWorker({ t: (job) => void lateness.push(Date.now() - job.dueAt) }, { idleRecheckMs: 5_000 });
    await sleep(100);
    const killed = await killClients(h.redis, `w-${h.queue.name}`);
    expect(killed).toBe(2); // the script connection and the Pub/Sub one
    // ioredis reconnects and re-subscribes; wait for both to be back.
    expect(
      await waitFor(async () => {
        const subs = (await h.redis.pubsub('NUMSUB', h.queue.keys[0]!.wake)) as [string, number];
        return Number(subs[1]) === 1;
      }, 5_000),
    ).toBe(true);
    await h.queue.schedule({ id: 'after-drop', type: 't', delayMs: 100 });
    expect(await waitFor(() => lateness.length === 1, 3_000, 2)).toBe(true);
    // Well inside the 5 s idle re-check: the wake message arrived on the new connection.
    expect(lateness[0]).toBeLessThanOrEqual(50);
  });
});
