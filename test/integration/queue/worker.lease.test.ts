// Leases: a long handler that extends its lease keeps the job to itself; one
// that does not is raced by a redelivery, and its late ack is fenced off.
import { afterEach, describe, expect, it } from 'vitest';
import { gate, type Harness, harness } from '../../helpers/queues.js';
import { sleep, waitFor } from '../../helpers/redis.js';

let h: Harness;
afterEach(async () => h?.close());

describe('leases', () => {
  it('a handler that extends its lease is not raced by another worker', async () => {
    h = harness('extend', { t: {} });
    const runs: number[] = [];
    const extended: boolean[] = [];
    const handler = async (_job: unknown, ctx: { extendLease(ms?: number): Promise<boolean> }) => {
      runs.push(Date.now());
      for (let i = 0; i < 5; i++) {
        await sleep(200);
        extended.push(await ctx.extendLease());
      }
    };
    await h.startWorker({ t: handler }, { leaseMs: 500 });
    await h.startWorker({ t: handler }, { leaseMs: 500 });
    await h.queue.schedule({ id: 'long', type: 't', delayMs: 0 });
    expect(await waitFor(async () => (await h.queue.get('long')) === null, 5_000)).toBe(true);
    expect(runs).toHaveLength(1); // 1 s of work under a 0.5 s lease, never redelivered
    expect(extended).toEqual([true, true, true, true, true]);
    expect(h.events.filter((e) => e.kind === 'stale')).toEqual([]);
  });

  it('a handler that outlives its lease loses the job to a redelivery, and its ack changes nothing', async () => {
    h = harness('expire', { t: {} });
    const first = gate();
    const deliveries: number[] = [];
    await h.startWorker(
      {
        t: async (job) => {
          deliveries.push(job.token);
          if (deliveries.length === 1) await first.promise; // the slow first delivery
        },
      },
      { leaseMs: 300, idleRecheckMs: 200 },
    );
    await h.queue.schedule({ id: 'slow', type: 't', delayMs: 0 });
    // The lease runs out; the same worker's next claim reclaims and redelivers it.
    expect(await waitFor(() => deliveries.length === 2, 5_000)).toBe(true);
    expect(await waitFor(async () => (await h.queue.get('slow')) === null, 2_000)).toBe(true);
    first.open(); // the first delivery finishes late and acks with its old token
    expect(await waitFor(() => h.events.some((e) => e.kind === 'stale' && e.op === 'ack'), 2_000)).toBe(true);
    expect(deliveries[1]).toBeGreaterThan(deliveries[0] as number);
    expect(await h.queue.stats()).toMatchObject({ pending: 0, inFlight: 0, dead: 0 });
  });

  it('a job waiting in the prefetch buffer renews its lease before it starts', async () => {
    h = harness('buffer', { t: {} });
    const ran: string[] = [];
    await h.queue.scheduleMany([
      { id: 'b1', type: 't', delayMs: 0 },
      { id: 'b2', type: 't', delayMs: 0 },
    ]);
    // One slot and one buffered job: b2 waits 700 ms behind b1 (past half of its
    // 1 s lease), then runs 600 ms. Started without renewal its lease would end
    // 300 ms into the run and the second worker would run it again.
    await h.startWorker(
      {
        t: async (job) => {
          ran.push(job.id);
          await sleep(job.id === 'b1' ? 700 : 600);
        },
      },
      { concurrency: 1, prefetch: 1, leaseMs: 1_000, idleRecheckMs: 5_000 },
    );
    expect(await waitFor(async () => (await h.queue.stats()).inFlight === 2, 2_000)).toBe(true);
    await h.startWorker({ t: (job) => void ran.push(`other:${job.id}`) }, { leaseMs: 1_000 });
    expect(
      await waitFor(async () => {
        const s = await h.queue.stats();
        return s.inFlight === 0 && s.pending === 0;
      }, 4_000),
    ).toBe(true);
    expect(ran).toEqual(['b1', 'b2']);
  });
});

describe('adaptive prefetch', () => {
  it('hands back the buffered jobs beyond its budget once handlers slow down', async () => {
    h = harness('stall', { t: {} });
    let slow = false;
    const { worker } = await h.startWorker({ t: async () => (slow ? new Promise<void>((r) => setTimeout(r, 500)) : undefined) }, { concurrency: 5 });
    // A backlog of fast jobs raises the budget (it follows the completion rate)...
    const now = Date.now();
    await h.queue.scheduleMany(Array.from({ length: 20_000 }, (_, i) => ({ id: `fast-${i}`, type: 't', at: now - 1_000 })));
    expect(await waitFor(async () => (await h.queue.stats()).pending < 10_000, 20_000, 20)).toBe(true);
    // ...then the handlers turn slow with thousands still waiting: the worker
    // holds far more claimed jobs than it can start soon.
    slow = true;
    const peak = (await h.queue.stats()).inFlight;
    expect(peak).toBeGreaterThan(100);
    // Within a few seconds it keeps only its pool and a small buffer.
    expect(await waitFor(async () => (await h.queue.stats()).inFlight <= 5 + 20 + 5, 10_000, 50)).toBe(true);
    expect(h.events.filter((e) => e.kind === 'stale')).toEqual([]);
    await worker.stop();
  });
});
