// Delivery: due-time order, never early by the Redis clock, exactly once under
// competing workers when nothing fails.
import { afterEach, describe, expect, it } from 'vitest';
import { type Harness, harness } from '../../helpers/queues.js';
import { waitFor } from '../../helpers/redis.js';

let h: Harness;
afterEach(async () => h?.close());

async function redisNowMs(h: Harness): Promise<number> {
  const [s, us] = await h.redis.time();
  return Number(s) * 1000 + Number(us) / 1000;
}

describe('delivery', () => {
  it('runs jobs in due-time order and never before their due time by the Redis clock', async () => {
    h = harness('order', { t: {} });
    const base = Date.now() + 200;
    // Scheduled out of order; due 15 ms apart.
    const offsets = [9, 3, 0, 7, 1, 8, 4, 2, 6, 5];
    await h.queue.scheduleMany(offsets.map((o) => ({ id: `j${o}`, type: 't', at: base + o * 15 })));
    const seen: { id: string; dueAt: number; serverNow: number }[] = [];
    await h.startWorker(
      {
        t: async (job) => {
          seen.push({ id: job.id, dueAt: job.dueAt, serverNow: await redisNowMs(h) });
        },
      },
      { concurrency: 1 },
    );
    expect(await waitFor(() => seen.length === 10, 5_000)).toBe(true);
    expect(seen.map((s) => s.id)).toEqual(offsets.map((_, i) => `j${i}`));
    for (const s of seen) expect(s.serverNow).toBeGreaterThanOrEqual(s.dueAt);
    expect(await waitFor(async () => (await h.queue.stats()).inFlight === 0, 2_000)).toBe(true);
  });

  it('8 competing workers handle each of 20 000 due jobs exactly once', async () => {
    h = harness('once', { t: {} }, 2);
    const n = 20_000;
    const now = Date.now();
    for (let i = 0; i < n; i += 2_000) {
      await h.queue.scheduleMany(Array.from({ length: 2_000 }, (_, j) => ({ id: `job-${i + j}`, type: 't', at: now - 1_000 + ((i + j) % 500) })));
    }
    const counts = new Map<string, number>();
    const handler = async (job: { id: string }) => {
      counts.set(job.id, (counts.get(job.id) ?? 0) + 1);
    };
    for (let w = 0; w < 8; w++) await h.startWorker({ t: handler }, { concurrency: 50 });
    const done = await waitFor(
      async () => {
        const s = await h.queue.stats();
        return s.pending === 0 && s.inFlight === 0;
      },
      45_000,
      50,
    );
    expect(done).toBe(true);
    expect(counts.size).toBe(n);
    const dupes = [...counts].filter(([, c]) => c !== 1);
    expect(dupes).toEqual([]);
    expect(h.events.filter((e) => e.kind === 'stale')).toEqual([]);
  });
});
