// ctx.extendLease(ms) checks its length (review 2026-11-23, F14): Infinity,
// NaN, a negative, zero, a fraction or a lease of ages rejects with a
// QueueInputError and leaves the lease as it was. Before the fix Infinity
// pinned the job in flight for ever (a lease scored "inf", never reclaimed)
// and answered "lease lost"; a negative one handed the job to the next claim
// while it still ran. Uncaught, the rejection is a handler error: the job is
// retried or dead-lettered like any failure, never left in flight.
import { afterEach, describe, expect, it } from 'vitest';
import { type Harness, harness } from '../helpers/queues.js';
import { waitFor } from '../helpers/redis.js';

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
