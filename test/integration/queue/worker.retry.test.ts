// Failures: backoff spacing, dead letters with the error, redrive, delete,
// non-retryable errors and per-job attempt limits.
import { afterEach, describe, expect, it } from 'vitest';
import { NonRetryableError } from '../../../src/queue/errors.js';
import { type Harness, harness } from '../../helpers/queues.js';
import { waitFor } from '../../helpers/redis.js';

let h: Harness;
afterEach(async () => h?.close());

const steps = { kind: 'steps', delaysMs: [100, 200, 300], jitter: 0 } as const;

describe('retries and dead letters', () => {
  it('spaces retries by the backoff policy, then dead-letters with the last error', async () => {
    h = harness('backoff', { flaky: { maxAttempts: 4, backoff: steps } });
    const starts: number[] = [];
    await h.startWorker({
      flaky: (job) => {
        starts.push(Date.now());
        throw new Error(`failure #${job.attempts}`);
      },
    });
    await h.queue.schedule({ id: 'f', type: 'flaky', delayMs: 0 });
    expect(await waitFor(async () => (await h.queue.get('f'))?.state === 'dead', 5_000)).toBe(true);
    expect(starts).toHaveLength(4);
    const gaps = starts.slice(1).map((t, i) => t - (starts[i] as number));
    // Never sooner than the policy says; a generous ceiling catches a missed wake-up (idle re-check is 5 s).
    gaps.forEach((g, i) => {
      expect(g).toBeGreaterThanOrEqual((steps.delaysMs[i] as number) - 2);
      expect(g).toBeLessThan((steps.delaysMs[i] as number) + 1_000);
    });
    const dead = await h.queue.get('f');
    expect(dead).toMatchObject({ state: 'dead', attempts: 4, lastError: 'Error: failure #4' });
    expect((await h.queue.stats()).dead).toBe(1);
    expect(h.events.filter((e) => e.kind === 'retried')).toHaveLength(3);
  });

  it('redrives a dead job, which then runs and is acked', async () => {
    h = harness('redrive', { t: { maxAttempts: 1 } });
    let healthy = false;
    const ok: string[] = [];
    await h.startWorker({
      t: (job) => {
        if (!healthy) throw new Error('downstream unavailable');
        ok.push(job.id);
      },
    });
    await h.queue.scheduleMany([
      { id: 'a', type: 't', delayMs: 0 },
      { id: 'b', type: 't', delayMs: 0 },
    ]);
    expect(await waitFor(async () => (await h.queue.stats()).dead === 2, 3_000)).toBe(true);
    healthy = true;
    expect(await h.queue.redrive('a')).toBe(true);
    expect(await h.queue.redrive('a')).toBe(false); // no longer dead
    expect(await waitFor(async () => (await h.queue.get('a')) === null, 3_000)).toBe(true);
    expect(ok).toEqual(['a']);
    expect(await h.queue.redriveAll()).toBe(1);
    expect(await waitFor(async () => (await h.queue.get('b')) === null, 3_000)).toBe(true);
    expect(ok).toEqual(['a', 'b']);
  });

  it('deletes a dead job and leaves live ones alone', async () => {
    h = harness('deldead', { t: { maxAttempts: 1 } });
    await h.startWorker({ t: () => Promise.reject(new Error('nope')) });
    await h.queue.schedule({ id: 'd', type: 't', delayMs: 0 });
    await h.queue.schedule({ id: 'later', type: 't', delayMs: 60_000 });
    expect(await waitFor(async () => (await h.queue.get('d'))?.state === 'dead', 3_000)).toBe(true);
    expect(await h.queue.deleteDead('later')).toBe(false);
    expect(await h.queue.deleteDead('d')).toBe(true);
    expect(await h.queue.get('d')).toBeNull();
    expect((await h.queue.get('later'))?.state).toBe('pending');
  });

  it('sends a not-retryable failure straight to the dead set', async () => {
    h = harness('nonretry', { t: { maxAttempts: 5 } });
    let calls = 0;
    await h.startWorker({
      t: () => {
        calls++;
        throw new NonRetryableError('card declined');
      },
    });
    await h.queue.schedule({ id: 'n', type: 't', delayMs: 0 });
    expect(await waitFor(async () => (await h.queue.get('n'))?.state === 'dead', 3_000)).toBe(true);
    expect(calls).toBe(1);
    expect((await h.queue.get('n'))?.lastError).toBe('NonRetryableError: card declined');
  });

  it('honours a per-job max attempts over the type default', async () => {
    h = harness('perjob', { t: { maxAttempts: 10, backoff: { kind: 'steps', delaysMs: [10], jitter: 0 } } });
    let calls = 0;
    await h.startWorker({
      t: () => {
        calls++;
        throw new Error('x');
      },
    });
    await h.queue.schedule({ id: 'p', type: 't', delayMs: 0, maxAttempts: 2 });
    expect(await waitFor(async () => (await h.queue.get('p'))?.state === 'dead', 3_000)).toBe(true);
    expect(calls).toBe(2);
    expect((await h.queue.get('p'))?.maxAttempts).toBe(2);
  });

  it('a handler can defer its job to a later time without it counting as a failure', async () => {
    h = harness('defer', { t: { maxAttempts: 1 } });
    const runs: { at: number; attempts: number }[] = [];
    await h.startWorker({
      t: (job) => {
        runs.push({ at: Date.now(), attempts: job.attempts });
        if (runs.length < 3) return { retryAt: Date.now() + 150 };
      },
    });
    await h.queue.schedule({ id: 'd', type: 't', delayMs: 0 });
    expect(await waitFor(async () => (await h.queue.get('d')) === null, 3_000)).toBe(true);
    expect(runs.map((r) => r.attempts)).toEqual([1, 1, 1]); // one attempt allowed, never used up
    expect((runs[1]?.at ?? 0) - (runs[0]?.at ?? 0)).toBeGreaterThanOrEqual(148);
    expect((runs[2]?.at ?? 0) - (runs[1]?.at ?? 0)).toBeGreaterThanOrEqual(148);
  });

  it('fails a job whose handler defers it to a time that is no time, and writes no such due time', async () => {
    h = harness('defer-bad', { t: { maxAttempts: 1 } });
    const bad = [Number.NaN, -5, Number.POSITIVE_INFINITY];
    await h.startWorker({ t: (job) => ({ retryAt: bad[Number(job.id.slice(1))] as number }) });
    await h.queue.scheduleMany(bad.map((_, i) => ({ id: `b${i}`, type: 't', delayMs: 0 })));
    for (const i of bad.keys()) {
      expect(await waitFor(async () => (await h.queue.get(`b${i}`))?.state === 'dead', 3_000)).toBe(true);
      expect((await h.queue.get(`b${i}`))?.lastError).toMatch(/due time must be a finite time in ms/);
    }
    expect(await h.queue.stats()).toMatchObject({ pending: 0, dead: 3 });
  });
});
