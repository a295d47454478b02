// Batch handlers: many claimed jobs of one type in one call, an outcome per
// job applied to that job alone (ack, hand-back, retry, dead), fenced by each
// job's own token; single-job handlers beside them unchanged.
import { afterEach, describe, expect, it } from 'vitest';
import { NonRetryableError } from '../../../src/queue/errors.js';
import type { BatchOutcome, Job } from '../../../src/queue/types.js';
import { type Harness, gate, harness } from '../../helpers/queues.js';
import { waitFor } from '../../helpers/redis.js';

let h: Harness;
afterEach(async () => h?.close());

const steps = { kind: 'steps', delaysMs: [100], jitter: 0 } as const;
/** Nothing pending or in flight any more (one stats call: the counts of one moment). */
const idle = async () => {
  const s = await h.queue.stats();
  return s.pending + s.inFlight === 0;
};

describe('batch handlers', () => {
  it('hands due jobs over in batches and applies each outcome to its own job', async () => {
    h = harness('batch-outcomes', { b: { maxAttempts: 2, backoff: steps }, single: {} });
    const calls: string[][] = [];
    const singles: string[] = [];
    const handedBack = new Set<string>();
    const hold = gate();
    await h.startWorker({
      b: {
        maxBatch: 50,
        concurrency: 1,
        async batch(jobs: readonly Job[]) {
          calls.push(jobs.map((j) => j.id));
          await hold.promise; // the first call holds the lane: what is claimed meanwhile waits for the next
          return jobs.map((j): BatchOutcome => {
            const kind = (j.payload as { kind: string }).kind;
            if (kind === 'later') return handedBack.has(j.id) ? undefined : (handedBack.add(j.id), { retryInMs: 150 });
            if (kind === 'flaky') return j.attempts === 1 ? { error: new Error('flaky once') } : undefined;
            if (kind === 'refused') return { error: new NonRetryableError('refused') };
            return undefined;
          });
        },
      },
      single: (job) => void singles.push(job.id),
    });
    await h.queue.schedule({ id: 'first', type: 'b', delayMs: 0, payload: { kind: 'ok' } });
    expect(await waitFor(async () => calls.length === 1, 3_000)).toBe(true);
    await h.queue.schedule({ id: 's', type: 'single', delayMs: 0 });
    // The single-job type is not held up by the batch lane.
    expect(await waitFor(async () => singles.length === 1, 3_000)).toBe(true);
    const kinds = ['ok', 'later', 'flaky', 'refused'];
    await h.queue.scheduleMany([...Array.from({ length: 120 }, (_, i) => ({ id: `j${i}`, type: 'b', delayMs: 0, payload: { kind: kinds[i % 4] } }))]);
    expect(await waitFor(async () => h.events.filter((e) => e.kind === 'claimed').length >= 2, 3_000)).toBe(true);
    hold.open();
    expect(await waitFor(idle, 5_000)).toBe(true);

    // The 120 waited together: they went in a few calls of at most 50, not one by one.
    expect(calls.every((c) => c.length <= 50)).toBe(true);
    const seen = new Set<string>();
    const callsToSeeAll = calls.slice(1).findIndex((c) => (c.forEach((id) => seen.add(id)), seen.size === 120)) + 1;
    expect(callsToSeeAll).toBeGreaterThanOrEqual(3);
    expect(callsToSeeAll).toBeLessThanOrEqual(6);
    expect([...handedBack].sort()).toEqual(Array.from({ length: 30 }, (_, i) => `j${i * 4 + 1}`).sort());
    // Per job: refused ones dead at once, flaky ones retried once, later ones handed back without an attempt used.
    const dead = await h.queue.listDead(null, 100);
    expect(dead.jobs.map((d) => d.id).sort()).toEqual(Array.from({ length: 30 }, (_, i) => `j${i * 4 + 3}`).sort());
    expect(dead.jobs.every((d) => d.lastError === 'NonRetryableError: refused' && d.attempts === 1)).toBe(true);
    const retried = h.events.flatMap((e) => (e.kind === 'retried' ? [e.job.id] : []));
    expect(retried.sort()).toEqual(Array.from({ length: 30 }, (_, i) => `j${i * 4 + 2}`).sort());
    const completed = new Set(h.events.flatMap((e) => (e.kind === 'completed' ? [e.job.id] : [])));
    for (let i = 0; i < 120; i++) expect(completed.has(`j${i}`)).toBe(i % 4 !== 3);
    // A hand-back uses no attempt: the later ones finished on their first.
    const laterDone = h.events.flatMap((e) => (e.kind === 'completed' && handedBack.has(e.job.id) ? [e.job.attempts] : []));
    expect(laterDone).toEqual(Array.from({ length: 30 }, () => 1));
  });

  it('fails every job of a call that throws or answers a wrong outcome, each by its own attempts', async () => {
    h = harness('batch-throws', { b: { maxAttempts: 3, backoff: steps } });
    let call = 0;
    const failedOnce = new Set<string>();
    await h.startWorker({
      b: {
        async batch(jobs: readonly Job[]) {
          call++;
          if (jobs.some((j) => !failedOnce.has(j.id))) {
            for (const j of jobs) failedOnce.add(j.id);
            if (call % 3 === 1) throw new Error('statement failed');
            // A bug: one outcome short, or one that is no outcome at all (applied to none of the jobs).
            if (call % 3 === 2) return jobs.slice(1).map(() => undefined);
            return jobs.map((_, i) => (i === jobs.length - 1 ? ('oops' as unknown as BatchOutcome) : undefined));
          }
          return jobs.map(() => undefined);
        },
      },
    });
    await h.queue.scheduleMany(Array.from({ length: 20 }, (_, i) => ({ id: `t${i}`, type: 'b', delayMs: 0 })));
    expect(await waitFor(idle, 5_000)).toBe(true);
    expect((await h.queue.stats()).dead).toBe(0);
    const retried = h.events.filter((e) => e.kind === 'retried');
    expect(new Set(retried.map((e) => (e.kind === 'retried' ? e.job.id : ''))).size).toBe(20);
    expect(retried.some((e) => e.kind === 'retried' && /statement failed|answered \d+ outcomes for \d+ jobs|answered oops for job/.test(e.error))).toBe(true);
    expect(h.events.filter((e) => e.kind === 'completed')).toHaveLength(20);
  });

  it('changes nothing for a job whose lease was lost while the batch ran (fenced by its token)', async () => {
    h = harness('batch-fenced', { b: { maxAttempts: 3 } });
    const seen: { id: string; attempts: number; token: number }[] = [];
    const first = gate();
    const release = gate();
    await h.startWorker(
      {
        b: {
          async batch(jobs: readonly Job[], ctx) {
            for (const j of jobs) seen.push({ id: j.id, attempts: j.attempts, token: j.token });
            if (jobs.some((j) => j.attempts === 1)) {
              first.open();
              await release.promise; // the lease (300 ms) runs out meanwhile
              expect(await ctx.extendLeases()).toEqual(jobs.map(() => false));
            }
            return jobs.map(() => undefined);
          },
        },
      },
      { leaseMs: 300 },
    );
    await h.queue.schedule({ id: 'x', type: 'b', delayMs: 0 });
    await first.promise;
    // Another delivery takes the job after the lease and acks it.
    expect(await waitFor(async () => seen.length === 2, 3_000)).toBe(true);
    expect(await waitFor(async () => (await h.queue.get('x')) === null, 3_000)).toBe(true);
    release.open();
    expect(await waitFor(async () => h.events.some((e) => e.kind === 'stale' && e.id === 'x'), 3_000)).toBe(true);
    expect(seen.map((s) => s.attempts)).toEqual([1, 2]);
    expect(await h.queue.get('x')).toBeNull();
  });

  it('hands a batch job its own context for work done job by job', async () => {
    h = harness('batch-of', { b: {} });
    const extended: boolean[] = [];
    await h.startWorker({
      b: {
        async batch(jobs: readonly Job[], ctx) {
          for (const j of jobs) extended.push(await ctx.of(j).extendLease(5_000));
          return jobs.map(() => undefined);
        },
      },
    });
    await h.queue.scheduleMany([
      { id: 'a', type: 'b', delayMs: 0 },
      { id: 'b', type: 'b', delayMs: 0 },
    ]);
    expect(await waitFor(idle, 3_000)).toBe(true);
    expect(extended).toEqual([true, true]);
  });

  it('refuses a batch handler with a batch size or concurrency below 1', async () => {
    h = harness('batch-bad', { b: {} });
    await expect(h.startWorker({ b: { maxBatch: 0, batch: async () => [] } })).rejects.toThrow(/maxBatch and concurrency/);
  });
});
