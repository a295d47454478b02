// Periodic jobs on the real queue: one pending occurrence whatever the number
// of workers, a missed occurrence runs once on recovery (not once per missed
// slot), cron times in a time zone, a schedule change moves the job, and a
// failed run comes back before the next occurrence.
import { afterEach, describe, expect, it } from 'vitest';
import { type PeriodicJob, periodicHandler, startPeriodicKeeper } from '../../../src/queue/periodic/periodic.js';
import { silentLogger } from '../../../src/queue/types.js';
import { type Harness, harness } from '../../helpers/queues.js';
import { sleep, waitFor } from '../../helpers/redis.js';

let h: Harness;
const keepers: { stop(): void }[] = [];
afterEach(async () => {
  for (const k of keepers.splice(0)) k.stop();
  await h?.close();
});

type Run = { occurrence: number; startedAt: number };

function periodic(schedule: PeriodicJob['schedule'], runs: Run[], fail?: () => boolean): PeriodicJob {
  return {
    id: 'p:job',
    type: 'p',
    schedule,
    run: async ({ occurrence }) => {
      runs.push({ occurrence, startedAt: Date.now() });
      if (fail?.()) throw new Error('this run fails');
    },
  };
}

/** Worker + keeper per "process", as the service starts them. */
async function startProcesses(job: PeriodicJob, n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    keepers.push(startPeriodicKeeper(h.queue, [job], silentLogger));
    await h.startWorker({ p: periodicHandler(job, silentLogger) }, { concurrency: 5 });
  }
}

describe('periodic jobs', () => {
  it('runs each occurrence once with four workers and keepers, one pending occurrence throughout', async () => {
    h = harness('periodic-many', { p: { maxAttempts: 1_000 } });
    const runs: Run[] = [];
    const job = periodic({ everyMs: 200 }, runs);
    await startProcesses(job, 4);
    const t0 = Date.now();
    while (Date.now() - t0 < 2_000) {
      const s = await h.queue.stats();
      expect(s.pending + s.inFlight).toBe(1);
      await sleep(37);
    }
    const occurrences = runs.map((r) => r.occurrence);
    expect(new Set(occurrences).size).toBe(occurrences.length);
    // About 2 000 / 200 runs: not one per worker.
    expect(runs.length).toBeGreaterThanOrEqual(5);
    expect(runs.length).toBeLessThanOrEqual(12);
    // A period apart (the next time is the worker's clock + 200 ms, the due time
    // Redis's: a ms or two of difference between them).
    for (let i = 1; i < runs.length; i++) expect(runs[i]!.occurrence - runs[i - 1]!.occurrence).toBeGreaterThanOrEqual(190);
  });

  it('runs a missed occurrence once on recovery, then keeps to the schedule', async () => {
    h = harness('periodic-missed', { p: { maxAttempts: 1_000 } });
    const runs: Run[] = [];
    const job = periodic({ cron: '* * * * * *' }, runs); // every second
    // Created while no worker runs; then "downtime" over three occurrences.
    keepers.push(startPeriodicKeeper(h.queue, [job], silentLogger));
    expect(await waitFor(async () => (await h.queue.get(job.id)) !== null, 2_000)).toBe(true);
    const firstDue = (await h.queue.get(job.id))!.dueAt!;
    await sleep(Math.max(0, firstDue - Date.now()) + 3_200);
    const recovered = Date.now();
    await h.startWorker({ p: periodicHandler(job, silentLogger) });
    expect(await waitFor(() => runs.length >= 2, 3_000, 5)).toBe(true);
    // One catch-up run for the first missed occurrence...
    expect(runs[0]!.occurrence).toBe(firstDue);
    // ...and then the first occurrence after recovery: the three seconds missed
    // in between are not replayed one by one.
    expect(runs[1]!.occurrence).toBeGreaterThan(recovered);
    expect(runs[1]!.occurrence % 1_000).toBe(0);
  });

  it('creates a daily job at the next 02:00 of its time zone, and moves it when the schedule changes', async () => {
    h = harness('periodic-cron', { p: { maxAttempts: 1_000 } });
    const runs: Run[] = [];
    const shanghai = periodic({ cron: '0 2 * * *', timezone: 'Asia/Shanghai' }, runs);
    keepers.push(startPeriodicKeeper(h.queue, [shanghai], silentLogger));
    expect(await waitFor(async () => (await h.queue.get(shanghai.id)) !== null, 2_000)).toBe(true);
    const due = (await h.queue.get(shanghai.id))!.dueAt!;
    // Shanghai is UTC+8 all year: 02:00 there is 18:00 UTC.
    expect(due % 86_400_000).toBe(18 * 3_600_000);
    expect(due).toBeGreaterThan(Date.now());
    expect(due - Date.now()).toBeLessThanOrEqual(86_400_000);

    // A new deployment runs it at 03:00 UTC instead: the keeper moves the pending job.
    keepers.splice(0).forEach((k) => k.stop());
    const utc = periodic({ cron: '0 3 * * *', timezone: 'UTC' }, runs);
    keepers.push(startPeriodicKeeper(h.queue, [utc], silentLogger));
    expect(await waitFor(async () => (await h.queue.get(utc.id))!.dueAt! % 86_400_000 === 3 * 3_600_000, 2_000)).toBe(true);
    expect(await h.queue.get(utc.id)).toMatchObject({ state: 'pending', payload: { schedule: 'cron 0 3 * * * UTC' } });
  });

  it('tries a failed every-N-ms run again at the next period when that comes before the retry delay', async () => {
    h = harness('periodic-fail', { p: { maxAttempts: 1_000 } });
    const runs: Run[] = [];
    let failures = 1;
    const job = periodic({ everyMs: 300 }, runs, () => failures-- > 0);
    await startProcesses(job, 1);
    expect(await waitFor(() => runs.length >= 2, 3_000, 5)).toBe(true);
    // Not 30 s later: the next period (300 ms) came first.
    expect(runs[1]!.startedAt - runs[0]!.startedAt).toBeGreaterThanOrEqual(250);
    expect(runs[1]!.startedAt - runs[0]!.startedAt).toBeLessThan(5_000);
    // The failure did not end the chain in the dead set.
    expect((await h.queue.get(job.id))?.state).not.toBe('dead');
  });

  it('abandons a run that outlives its time limit, aborting its signal, and keeps to the schedule', async () => {
    h = harness('periodic-hung', { p: { maxAttempts: 1_000 } });
    const runs: Run[] = [];
    const signals: AbortSignal[] = [];
    // The first run hangs for good and ignores its signal (a query on a
    // connection that never answers); the later ones finish at once.
    const job: PeriodicJob = {
      id: 'p:job',
      type: 'p',
      schedule: { everyMs: 100 },
      maxRunMs: 300,
      run: ({ occurrence, signal }) => {
        runs.push({ occurrence, startedAt: Date.now() });
        signals.push(signal);
        return runs.length === 1 ? new Promise<never>(() => {}) : Promise.resolve();
      },
    };
    await startProcesses(job, 1);
    expect(await waitFor(() => runs.length >= 3, 5_000, 5), 'runs after the hung one').toBe(true);
    expect(signals[0]!.aborted).toBe(true);
    expect(String(signals[0]!.reason)).toMatch(/periodic run did not finish within 300 ms/);
    expect(runs[1]!.startedAt - runs[0]!.startedAt).toBeGreaterThanOrEqual(300);
    expect(signals[1]!.aborted).toBe(false);
    const s = await h.queue.stats();
    expect(s.pending + s.inFlight).toBe(1);
    expect(s.dead).toBe(0);
  });

  it('refuses a periodic job with a limit that is not a positive integer', () => {
    const job = { ...periodic({ everyMs: 100 }, []), maxRunMs: 0 };
    expect(() => periodicHandler(job, silentLogger)).toThrow(/maxRunMs of periodic job p:job must be a positive integer/);
  });

  it('retries a failed cron run for the same occurrence when the retry comes before the next one', async () => {
    h = harness('periodic-cron-fail', { p: { maxAttempts: 1_000 } });
    const runs: Run[] = [];
    let failures = 1;
    // Every 2 s; a failed run is tried again after 300 ms.
    const job = { ...periodic({ cron: '*/2 * * * * *' }, runs, () => failures-- > 0), retryAfterMs: 300 };
    await startProcesses(job, 1);
    expect(await waitFor(() => runs.length >= 3, 8_000, 5)).toBe(true);
    // The retry stands for the occurrence that failed; the run after it for the next slot.
    expect(runs[1]!.occurrence).toBe(runs[0]!.occurrence);
    expect(runs[1]!.startedAt - runs[0]!.startedAt).toBeGreaterThanOrEqual(250);
    expect(runs[1]!.startedAt - runs[0]!.startedAt).toBeLessThan(1_500);
    expect(runs[2]!.occurrence).toBe(runs[0]!.occurrence + 2_000);
  });
});
