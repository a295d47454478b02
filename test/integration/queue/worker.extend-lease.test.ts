// ctx.extendLease(ms) checks its length (review 2026-11-23, F14): Infinity,
// NaN, a negative, zero, a fraction or a lease of ages rejects with a
// QueueInputError and leaves the lease as it was. Before the fix Infinity
// pinned the job in flight for ever (a lease scored "inf", never reclaimed)
// and answered "lease lost"; a negative one handed the job to the next claim
// while it still ran. Uncaught, the rejection is a handler error: the job is
// retried or dead-lettered like any failure, never left in flight.
import { afterEach, describe, expect, it } from 'vitest';
import { type Harness, harness } from '../../helpers/queues.js';
import { waitFor } from '../../helpers/redis.js';

let h: Harness;
afterEach(async () => h?.close());

/** The lengths a handler might pass by mistake, by job id. */
const BAD_LEASES: Record<string, number> = {
  infinity: Number.POSITIVE_INFINITY,
  nan: Number.NaN,
  negative: -1,
  zero: 0,
  fraction: 1.5,
  ages: 1e15,
};
const ids = Object.keys(BAD_LEASES);
const leaseOf = (id: string) => BAD_LEASES[id] as number;

const steps = { kind: 'steps', delaysMs: [50], jitter: 0 } as const;

describe('ctx.extendLease with a bad length', () => {
  it('rejects with a QueueInputError and leaves the lease as it was', async () => {
    h = harness('extend-bad', { t: {} });
    const k = h.queue.keys[0]!;
    const seen = new Map<string, { result: string; leaseBefore: string | null; leaseAfter: string | null; renewed: boolean }>();
    await h.startWorker(
      {
        t: async (job, ctx) => {
          const leaseBefore = await h.redis.zscore(k.inflight, job.id);
          const result = await ctx.extendLease(leaseOf(job.id)).then(
            (r) => `resolved ${r}`,
            (err: unknown) => `rejected ${(err as Error).name}: ${(err as Error).message}`,
          );
          const leaseAfter = await h.redis.zscore(k.inflight, job.id);
          seen.set(job.id, { result, leaseBefore, leaseAfter, renewed: await ctx.extendLease(5_000) });
        },
      },
      { leaseMs: 30_000 },
    );
    await h.queue.scheduleMany(ids.map((id) => ({ id, type: 't', delayMs: 0 })));
    expect(await waitFor(() => seen.size === ids.length, 5_000)).toBe(true);
    for (const id of ids) {
      const s = seen.get(id)!;
      expect(s.result, id).toBe(`rejected QueueInputError: a lease must be whole ms from 1 to 86400000: ${leaseOf(id)}`);
      expect(s.leaseAfter, id).toBe(s.leaseBefore); // unchanged, and a finite time
      expect(Number.isFinite(Number(s.leaseAfter)), id).toBe(true);
      expect(s.renewed, id).toBe(true); // the delivery still holds its job
    }
    expect(await waitFor(async () => (await h.queue.stats()).inFlight === 0, 5_000)).toBe(true);
    expect(await h.queue.stats()).toMatchObject({ pending: 0, inFlight: 0, dead: 0 });
    expect(h.events.filter((e) => e.kind === 'stale')).toEqual([]);
  });

  it('uncaught, fails the job like any handler error: dead-lettered on its last attempt, nothing left in flight', async () => {
    h = harness('extend-dead', { t: { maxAttempts: 1 } });
    const k = h.queue.keys[0]!;
    await h.startWorker({ t: async (job, ctx) => void (await ctx.extendLease(leaseOf(job.id))) }, { leaseMs: 30_000 });
    await h.queue.scheduleMany(ids.map((id) => ({ id, type: 't', delayMs: 0 })));
    const allDead = await waitFor(async () => (await h.queue.stats()).dead === ids.length, 5_000);
    expect(allDead, JSON.stringify(await h.queue.stats())).toBe(true);
    for (const id of ids) {
      expect(await h.queue.get(id), id).toMatchObject({
        state: 'dead',
        attempts: 1,
        lastError: `QueueInputError: a lease must be whole ms from 1 to 86400000: ${leaseOf(id)}`,
      });
    }
    expect(await h.redis.zrange(k.inflight, 0, -1, 'WITHSCORES')).toEqual([]);
  });

  it('uncaught, fails the job like any handler error: retried after its backoff, then run to the end', async () => {
    h = harness('extend-retry', { t: { maxAttempts: 2, backoff: steps } });
    const attempts: number[] = [];
    await h.startWorker(
      {
        t: async (job, ctx) => {
          attempts.push(job.attempts);
          if (job.attempts === 1) await ctx.extendLease(Number.POSITIVE_INFINITY);
        },
      },
      { leaseMs: 30_000 },
    );
    await h.queue.schedule({ id: 'once-bad', type: 't', delayMs: 0 });
    expect(await waitFor(async () => (await h.queue.get('once-bad')) === null, 5_000)).toBe(true);
    expect(attempts).toEqual([1, 2]);
    const retried = h.events.filter((e) => e.kind === 'retried');
    expect(retried.map((e) => e.kind === 'retried' && e.error)).toEqual(['QueueInputError: a lease must be whole ms from 1 to 86400000: Infinity']);
    expect(await h.queue.stats()).toMatchObject({ pending: 0, inFlight: 0, dead: 0 });
  });
});

describe('ctx.leaseLeftMs', () => {
  it("reckons the lease from the claim and from each renewal that held, never past Redis's own; per job in a batch", async () => {
    h = harness('lease-left', { t: {}, b: {} });
    const k = h.queue.keys[0]!;
    /** Redis's lease end less the local time before the reckoning was read: what is surely left. */
    const redisLeft = async (id: string, before: number) => Number(await h.redis.zscore(k.inflight, id)) - before;
    const seen: { id: string; left: number; redis: number }[] = [];
    const look = async (id: string, when: string, ctx: { leaseLeftMs(): number }) => {
      const before = Date.now();
      const left = ctx.leaseLeftMs();
      seen.push({ id: `${id}:${when}`, left, redis: await redisLeft(id, before) });
    };
    await h.startWorker(
      {
        t: async (job, ctx) => {
          await look(job.id, 'claimed', ctx);
          expect(await ctx.extendLease(5_000)).toBe(true);
          await look(job.id, 'renewed', ctx);
        },
        b: {
          batch: async (jobs, ctx) => {
            expect(await ctx.extendLeases(4_000)).toEqual(jobs.map(() => true));
            for (const j of jobs) await look(j.id, 'renewed', ctx.of(j));
            return jobs.map(() => undefined);
          },
        },
      },
      { leaseMs: 30_000 },
    );
    await h.queue.scheduleMany([
      { id: 'one', type: 't', delayMs: 0 },
      { id: 'b1', type: 'b', delayMs: 0 },
      { id: 'b2', type: 'b', delayMs: 0 },
    ]);
    expect(await waitFor(() => seen.length === 4, 5_000)).toBe(true);
    for (const s of seen) {
      // Never more than Redis holds it for (2 ms for the two clocks' whole-ms rounding).
      expect(s.left, s.id).toBeLessThanOrEqual(s.redis + 2);
      expect(s.left, s.id).toBeGreaterThan(0);
    }
    const left = (id: string) => seen.find((s) => s.id === id)!.left;
    // A fresh claim's lease is at least half of one (the worker renews a job that waited longer), a renewal's its length.
    expect(left('one:claimed')).toBeGreaterThan(15_000);
    expect(left('one:renewed')).toBeLessThanOrEqual(5_000);
    expect(left('b1:renewed')).toBeLessThanOrEqual(4_000);
    expect(left('b2:renewed')).toBeLessThanOrEqual(4_000);
  });
});
