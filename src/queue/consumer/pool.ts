// A worker's pool: claimed jobs wait in the buffer (single handlers) or their
// type's lane (batch handlers) and start while fewer than `concurrency`
// handler calls run; jobs stalled behind slow handlers are handed back.
import type { BatchLane, RunBatch } from './batch-lane.js';
import { handBackAtDue } from './hand-back.js';
import type { Claimed } from './lease.js';
import type { PrefetchBudget } from './prefetch-budget.js';
import type { Queue } from '../producer/queue.js';
import type { RedisClient } from '../scripts/scripts.js';
import type { QueueLogger } from '../types.js';
import { localNow } from '../wake/server-clock.js';

/** A waiting list whose oldest job waited this long (ms) has slowed down since its claim. */
const STALLED_MS = 1_000;

export type PoolOptions = {
  readonly queue: Queue;
  readonly redis: RedisClient;
  readonly log: QueueLogger;
  /** Handler calls running at once (a batch is one). */
  readonly concurrency: number;
  /** Claimed jobs that may wait beyond the running ones. */
  readonly prefetch: PrefetchBudget;
  readonly lanes: ReadonlyMap<string, BatchLane>;
  /** Runs one job of a single handler; false when it was not run (its lease was lost while it waited). */
  run(c: Claimed): Promise<boolean>;
  runBatch: RunBatch;
  /** A useful batch fits again: pollers waiting for room should claim. */
  onRoom(): void;
};

export type Pool = {
  /** How many more jobs the pool can take now (0 once closed). */
  room(): number;
  /** A claimed job joins its type's lane, or the buffer. */
  add(c: Claimed): void;
  /** Starts what fits, hands back stalled jobs, and wakes pollers when there is room. */
  pump(): void;
  /** Takes and starts no more jobs. */
  close(): void;
  /** Hands back every waiting job, attempts refunded; resolves to how many went back. */
  releaseWaiting(): Promise<number>;
  /** Resolves when the running handler calls end, or after `ms`. */
  settle(ms: number): Promise<void>;
  /** Jobs held by running handler calls (a batch holds many). */
  runningJobs(): number;
};

export function createPool(o: PoolOptions): Pool {
  const { queue, redis, log, concurrency, prefetch, lanes } = o;
  const buffer: Claimed[] = [];
  /** Handler calls in progress, and the jobs they hold. */
  const running = new Set<Promise<void>>();
  let runningJobs = 0;
  let closed = false;
  const waitingLists = (): Claimed[][] => [buffer, ...[...lanes.values()].map((l) => l.waiting)];
  const buffered = () => waitingLists().reduce((n, w) => n + w.length, 0);
  const room = () => (closed ? 0 : concurrency + prefetch.current() - runningJobs - buffered());
  // A poller waiting for room is woken once a useful batch fits, not per finished job.
  const lowWater = () => Math.max(1, Math.floor((concurrency + prefetch.current()) / 4));

  function pump(): void {
    if (closed) return;
    startWhatFits();
    handBackStalled();
    if (room() >= lowWater()) o.onRoom();
  }

  function startWhatFits(): void {
    let started = true;
    while (started && running.size < concurrency) {
      started = false;
      for (const [type, lane] of lanes) {
        if (lane.waiting.length === 0 || lane.running >= lane.limit || running.size >= concurrency) continue;
        const batch = lane.waiting.splice(0, lane.max);
        lane.running++;
        launch(o.runBatch(type, lane.handler, batch), batch.length, batch[0]?.job.id, () => lane.running--);
        started = true;
      }
      const c = running.size < concurrency ? buffer.shift() : undefined;
      if (c) {
        launch(
          o.run(c).then((ran) => (ran ? 1 : 0)),
          1,
          c.job.id,
        );
        started = true;
      }
    }
  }

  // Jobs slowed down since they were claimed (the oldest waiting one has
  // waited long): hand back what is waiting beyond the budget, so other
  // workers take it now instead of it waiting here behind slow handlers.
  function handBackStalled(): void {
    const budget = prefetch.current();
    for (const waiting of waitingLists()) {
      const head = waiting[0];
      if (head && waiting.length > budget && localNow() - head.claimedAt > STALLED_MS) void releaseFrom(waiting, budget);
    }
  }

  /** Runs one handler call holding `jobs` claimed jobs; `ran` resolves to how many were run (not lost while they waited). */
  function launch(ran: Promise<number>, jobs: number, firstId: string | undefined, done?: () => void): void {
    runningJobs += jobs;
    const p = ran
      .then((n) => {
        for (let i = 0; i < n; i++) prefetch.completed();
      })
      .catch((err: unknown) => log.error({ err, queue: queue.name, jobId: firstId, jobs }, 'job run failed; its jobs return after their lease'))
      .finally(() => {
        running.delete(p);
        runningJobs -= jobs;
        done?.();
        pump();
      });
    running.add(p);
  }

  /**
   * Hands back the jobs of a waiting list from index `from` on, attempts
   * refunded, each at its own due time: they come back in the order they
   * were due, ahead of jobs that fell due while they waited here.
   */
  function releaseFrom(waiting: Claimed[], from: number): Promise<number> {
    return handBackAtDue(
      { queue, redis, log },
      waiting.splice(from).map((c) => c.job),
    );
  }

  async function releaseWaiting(): Promise<number> {
    const counts = await Promise.all(waitingLists().map((w) => releaseFrom(w, 0)));
    return counts.reduce((a, b) => a + b, 0);
  }

  async function settle(ms: number): Promise<void> {
    let t: NodeJS.Timeout | undefined;
    await Promise.race([Promise.all([...running]), new Promise((r) => (t = setTimeout(r, ms)))]);
    clearTimeout(t);
  }

  return {
    room,
    add(c) {
      (lanes.get(c.job.type)?.waiting ?? buffer).push(c);
    },
    pump,
    close() {
      closed = true;
    },
    releaseWaiting,
    settle,
    runningJobs: () => runningJobs,
  };
}
