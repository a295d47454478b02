// Job priorities through real workers: several workers drain a backlog in
// priority order (within the window of what they hold at once), earlier due
// first within a priority, nothing before its due time; and the starvation
// bound: a low-priority job behind an endless stream of higher ones starts
// once it is overdue by the queue's aging bound, not never.
import { afterEach, describe, expect, it } from 'vitest';
import { type Harness, harness } from '../../helpers/queues.js';
import { redisNowMs, sleep, waitFor } from '../../helpers/redis.js';

let h: Harness;
afterEach(async () => h?.close());

const priorityOf = (id: string) => Number(/^p(\d)-/.exec(id)?.[1]);

describe('priorities with workers', () => {
  it('several workers start due jobs by priority, then by due time, none before its time', async () => {
    h = harness('prio-order', { t: {} }, 1, { priorityAgingMs: 3_600_000 });
    const now = await redisNowMs(h.redis);
    const perPriority = 60;
    const jobs = [9, 5, 1].flatMap((p) => Array.from({ length: perPriority }, (_, i) => ({ id: `p${p}-${i}`, at: now - 1_000 + ((i * 37 + p * 11) % 997) })));
    // Scheduled in an order unrelated to priority or due time.
    jobs.sort((a, b) => ((a.at * 7919) % 101) - ((b.at * 7919) % 101) || a.id.localeCompare(b.id));
    await h.queue.scheduleMany(jobs.map((j) => ({ id: j.id, type: 't', at: j.at, ...(priorityOf(j.id) !== 5 && { priority: priorityOf(j.id) }) })));
    const future = { id: 'p9-future', at: now + 400 };
    await h.queue.schedule({ id: future.id, type: 't', at: future.at, priority: 9 });

    const started: { id: string; due: number; at: number }[] = [];
    const handler = async (job: { id: string; dueAt: number }, ctx: { now(): number }) => {
      started.push({ id: job.id, due: job.dueAt, at: ctx.now() });
      await sleep(2);
    };
    const workers = 3;
    const opts = { concurrency: 2, prefetch: 2, batchSize: 4 };
    for (let w = 0; w < workers; w++) await h.startWorker({ t: handler }, opts);
    expect(await waitFor(() => started.length === jobs.length + 1, 30_000, 10)).toBe(true);

    // What the workers hold at once (claimed, waiting or running) may start
    // out of order; nothing beyond that window may.
    const window = workers * (opts.batchSize + opts.concurrency + opts.prefetch);
    const mine = started.filter((s) => s.id !== future.id);
    mine.forEach((s, i) => {
      const p = priorityOf(s.id);
      const lowerBefore = mine.slice(0, i).filter((x) => priorityOf(x.id) < p).length;
      expect(lowerBefore, `${s.id} started after ${lowerBefore} jobs of lower priority`).toBeLessThanOrEqual(window);
      const laterBefore = mine.slice(0, i).filter((x) => priorityOf(x.id) === p && x.due > s.due).length;
      expect(laterBefore, `${s.id} started after ${laterBefore} later jobs of its priority`).toBeLessThanOrEqual(window);
    });
    const f = started.find((s) => s.id === future.id)!;
    expect(f.due).toBe(future.at);
    // ctx.now() estimates the Redis clock; a few ms of estimate error at most.
    expect(f.at).toBeGreaterThanOrEqual(future.at - 20);
    expect(new Set(started.map((s) => s.id)).size).toBe(started.length); // none twice
  });

  it('a prioritized job moved or cancelled while a worker runs starts at its new time only, once; a cancelled one never', async () => {
    h = harness('prio-moves', { t: {} }, 1);
    const started: { id: string; due: number; at: number }[] = [];
    await h.startWorker({ t: (job, ctx) => void started.push({ id: job.id, due: job.dueAt, at: ctx.now() }) });
    const now = await redisNowMs(h.redis);
    // Enough jobs in lane 8 that it has several buckets (lua/lib/due-index.lua):
    // a move must take the job out of its old bucket, not only file it anew.
    const fill = Array.from({ length: 100 }, (_, i) => ({ id: `p8-fill-${i}`, type: 't', at: now + 300 + i, priority: 8 }));
    await h.queue.scheduleMany([
      ...fill,
      { id: 'p8-moved', type: 't', at: now + 300, priority: 8 },
      { id: 'p2-moved', type: 't', at: now + 300, priority: 2 },
      { id: 'p8-cancelled', type: 't', at: now + 300, priority: 8 },
      { id: 'p8-kept', type: 't', at: now + 300, priority: 8 },
    ]);
    expect(await h.queue.reschedule('p8-moved', { at: now + 1_200 })).toMatchObject({ status: 'updated' });
    expect(await h.queue.reschedule('p2-moved', { at: now + 1_200 })).toMatchObject({ status: 'updated' });
    expect(await h.queue.cancel('p8-cancelled')).toEqual({ cancelled: true, state: 'pending' });
    expect(await waitFor(() => started.length >= fill.length + 3, 10_000, 10)).toBe(true);
    await sleep(300);
    const mine = started.filter((s) => !s.id.startsWith('p8-fill-'));
    expect(mine.map((s) => s.id).sort()).toEqual(['p2-moved', 'p8-kept', 'p8-moved']);
    for (const s of mine.filter((x) => x.id.endsWith('-moved'))) {
      expect(s.due).toBe(now + 1_200);
      expect(s.at, `${s.id} started before its new time`).toBeGreaterThanOrEqual(now + 1_200 - 20);
    }
    expect(started).toHaveLength(fill.length + 3); // none twice
    expect(await h.queue.stats()).toMatchObject({ pending: 0, inFlight: 0 });
  });

  it('starts a low-priority job behind an endless stream of higher ones once it is past the aging bound', async () => {
    const agingMs = 1_000;
    h = harness('prio-aging', { t: {} }, 1, { priorityAgingMs: agingMs });
    const now = await redisNowMs(h.redis);
    // More high-priority work than the worker gets through in the test (10 ms
    // each, one at a time), and more arriving while it runs.
    let n = 0;
    const more = (count: number, at: number) => h.queue.scheduleMany(Array.from({ length: count }, () => ({ id: `p9-${n++}`, type: 't', at, priority: 9 })));
    // The low job is due first: the higher ones all became due after it, so
    // past the bound it is the oldest and goes next (oldest first).
    await h.queue.schedule({ id: 'p0-low', type: 't', at: now - 10, priority: 0 });
    await more(300, now);

    let low: { latenessMs: number; highLeft: number } | null = null;
    let highDone = 0;
    await h.startWorker(
      {
        t: async (job, ctx) => {
          if (job.id === 'p0-low') {
            low = { latenessMs: ctx.now() - job.dueAt, highLeft: n - highDone };
            return;
          }
          await sleep(10);
          highDone++;
        },
      },
      { concurrency: 1, prefetch: 1, batchSize: 1 },
    );
    let feeding = true;
    const feeder = (async () => {
      while (feeding) {
        await more(20, (await redisNowMs(h.redis)) - 1);
        await sleep(100);
      }
    })();
    const ok = await waitFor(() => low !== null, 15_000, 10);
    feeding = false;
    await feeder;
    expect(ok).toBe(true);
    const got = low as unknown as { latenessMs: number; highLeft: number };
    // It waited behind the higher priority (not taken before the bound)...
    expect(got.latenessMs).toBeGreaterThanOrEqual(agingMs - 50);
    // ...and no longer than the bound plus a margin that holds on a machine
    // twice as slow (a claim every job, 10 ms a job here).
    expect(got.latenessMs).toBeLessThanOrEqual(agingMs + 3_000);
    // It went ahead of high-priority jobs still waiting.
    expect(got.highLeft).toBeGreaterThan(5);
  });

  it('starts an urgent job ahead of a backlog older than the aging bound', async () => {
    h = harness('prio-backlog', { t: {} }, 1, { priorityAgingMs: 1_000 });
    const now = await redisNowMs(h.redis);
    await h.queue.scheduleMany(Array.from({ length: 200 }, (_, i) => ({ id: `old-${i}`, type: 't', at: now - 20_000 + i })));
    await h.queue.schedule({ id: 'urgent', type: 't', at: now, priority: 9 });
    const order: string[] = [];
    await h.startWorker(
      {
        t: async (job) => {
          order.push(job.id);
        },
      },
      { concurrency: 1, prefetch: 1, batchSize: 1 },
    );
    expect(await waitFor(() => order.length === 201, 30_000, 10)).toBe(true);
    // Past the bound, the backlog takes at most about every other claim: the
    // urgent job goes within the first few, not after the 200.
    expect(order.indexOf('urgent')).toBeLessThan(10);
  });
});
