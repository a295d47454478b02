// Graceful shutdown: stop claiming, hand back claimed-but-unstarted jobs at
// once, let running handlers finish within the grace period.
import { afterEach, describe, expect, it } from 'vitest';
import { NonRetryableError } from '../../../src/queue/index.js';
import { gate, type Harness, harness } from '../../helpers/queues.js';
import { sleep, waitFor } from '../../helpers/redis.js';

let h: Harness;
afterEach(async () => h?.close());

describe('graceful shutdown', () => {
  it('releases unstarted jobs at once and waits for running ones', async () => {
    h = harness('shutdown', { t: {} });
    const release = gate();
    const started: string[] = [];
    const finished: string[] = [];
    await h.queue.scheduleMany(Array.from({ length: 12 }, (_, i) => ({ id: `s${i}`, type: 't', delayMs: 0 })));
    const { worker } = await h.startWorker(
      {
        t: async (job) => {
          started.push(job.id);
          await release.promise;
          finished.push(job.id);
        },
      },
      { concurrency: 2, prefetch: 10, leaseMs: 60_000 },
    );
    expect(await waitFor(async () => (await h.queue.stats()).inFlight === 12, 3_000)).toBe(true);
    expect(started).toHaveLength(2);

    const stopping = worker.stop();
    // The unstarted ten go back to pending long before their 60 s lease would end.
    expect(await waitFor(async () => (await h.queue.stats()).pending === 10, 2_000)).toBe(true);
    release.open();
    expect(await stopping).toEqual({ released: 10, unfinished: 0 });
    expect(finished.sort()).toEqual([...started].sort());

    const s = await h.queue.stats();
    expect(s).toMatchObject({ pending: 10, inFlight: 0, dueNow: 10 });
    for (let i = 0; i < 12; i++) {
      const j = await h.queue.get(`s${i}`);
      if (started.includes(`s${i}`)) expect(j).toBeNull();
      else expect(j).toMatchObject({ state: 'pending', attempts: 0 });
    }

    // Another worker takes the released jobs; nothing ran twice.
    const second: string[] = [];
    await h.startWorker({ t: (job) => void second.push(job.id) });
    expect(await waitFor(() => second.length === 10, 3_000)).toBe(true);
    expect(second.filter((id) => started.includes(id))).toEqual([]);
  });

  it('aborts handlers that outlive the grace period and leaves their jobs leased', async () => {
    h = harness('grace', { t: {} });
    let aborted = false;
    await h.queue.schedule({ id: 'slow', type: 't', delayMs: 0 });
    const { worker } = await h.startWorker(
      {
        t: (_job, ctx) =>
          new Promise<void>((resolve) => {
            ctx.signal.addEventListener('abort', () => {
              aborted = true;
              resolve();
            });
          }),
      },
      { shutdownGraceMs: 200, leaseMs: 60_000 },
    );
    expect(await waitFor(async () => (await h.queue.stats()).inFlight === 1, 3_000)).toBe(true);
    await sleep(20);
    const r = await worker.stop();
    expect(r).toEqual({ released: 0, unfinished: 1 });
    expect(aborted).toBe(true);
  });

  it('hands back a job whose handler gives up on the abort, with its attempt refunded', async () => {
    h = harness('abort', { t: { maxAttempts: 1 } });
    await h.queue.schedule({ id: 'cut', type: 't', delayMs: 0 });
    const { worker } = await h.startWorker(
      {
        t: (_job, ctx) =>
          new Promise<void>((_resolve, reject) => {
            ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason));
          }),
      },
      { shutdownGraceMs: 100, leaseMs: 60_000 },
    );
    expect(await waitFor(async () => (await h.queue.stats()).inFlight === 1, 3_000)).toBe(true);
    expect(await worker.stop()).toEqual({ released: 0, unfinished: 1 });
    // Not dead-lettered although it had a single attempt: shutdown is not a failure.
    expect(await h.queue.get('cut')).toMatchObject({ state: 'pending', attempts: 0, lastError: null });
  });

  it('dead-letters a job whose handler refuses it for good while shutdown cuts in: not handed back to run again', async () => {
    // A receiver's 400 recorded as final just as the grace period ran out:
    // handed back with its attempt refunded, the job would come back as a
    // first attempt and call the receiver again.
    h = harness('abort_final', { t: { maxAttempts: 5 } });
    await h.queue.schedule({ id: 'refused', type: 't', delayMs: 0 });
    const { worker } = await h.startWorker(
      {
        t: (_job, ctx) =>
          new Promise<void>((_resolve, reject) => {
            ctx.signal.addEventListener('abort', () => reject(new NonRetryableError('refused: HTTP 400')));
          }),
      },
      { shutdownGraceMs: 100, leaseMs: 60_000 },
    );
    expect(await waitFor(async () => (await h.queue.stats()).inFlight === 1, 3_000)).toBe(true);
    await worker.stop();
    expect(await h.queue.get('refused')).toMatchObject({ state: 'dead', attempts: 1, lastError: 'NonRetryableError: refused: HTTP 400' });
  });
});
