// A loop that sleeps until a planned time instead of ticking: each step says
// when it wants to run next, and a wake-up (a Pub/Sub announcement, free room
// in a pool) can bring that time forward. Used by the queue's shard pollers and
// the batcher's flushers.
import { localNow } from './server-clock.js';

/**
 * One round of work. Returns the local monotonic time (ms) to run again,
 * 'again' to run again at once, or 'wait' to sleep until woken. A failing step
 * should log and return a retry time; one that throws anyway is reported to
 * the loop's onError and run again after STEP_ERROR_BACKOFF_MS (a loop never dies).
 */
export type LoopStep = () => Promise<number | 'again' | 'wait'>;

const STEP_ERROR_BACKOFF_MS = 250;

export type WakeLoop = {
  /** Run a step at local monotonic time `at`, or sooner if already planned. */
  wakeAt(at: number): void;
  wakeNow(): void;
  /** No more steps; resolves when the step in progress (if any) is done. */
  stop(): Promise<void>;
};

export function createWakeLoop(step: LoopStep, onError: (err: unknown) => void): WakeLoop {
  let timer: NodeJS.Timeout | null = null;
  let immediate: NodeJS.Immediate | null = null;
  let timerAt = Number.POSITIVE_INFINITY;
  let running: Promise<void> | null = null;
  let rerun = false;
  let stopped = false;

  function wakeAt(at: number): void {
    if (stopped || at >= timerAt) return;
    if (running && at <= localNow()) {
      rerun = true; // the step in progress may have missed this: run once more
      return;
    }
    plan(at);
  }

  function plan(at: number): void {
    cancelPlan();
    timerAt = at;
    const delay = at - localNow();
    // setTimeout(0) waits at least 1 ms; work that is due now goes next in the event loop.
    if (delay <= 0) immediate = setImmediate(fire);
    else timer = setTimeout(fire, delay);
  }

  function cancelPlan(): void {
    if (timer) clearTimeout(timer);
    if (immediate) clearImmediate(immediate);
    timer = null;
    immediate = null;
  }

  function fire(): void {
    cancelPlan();
    timerAt = Number.POSITIVE_INFINITY;
    if (stopped) return;
    if (running) {
      rerun = true;
      return;
    }
    running = loop().finally(() => {
      running = null;
      if (rerun && !stopped) {
        rerun = false;
        wakeAt(localNow());
      }
    });
  }

  async function loop(): Promise<void> {
    while (!stopped) {
      rerun = false;
      let next: number | 'again' | 'wait';
      try {
        next = await step();
      } catch (err) {
        try {
          onError(err);
        } catch {
          // A throwing logger must not end the loop either.
        }
        next = localNow() + STEP_ERROR_BACKOFF_MS;
      }
      if (stopped) return;
      if (next === 'again') continue;
      // Keep a sooner wake-up planned (by a message) while the step ran.
      if (next !== 'wait' && !rerun && next < timerAt) plan(next);
      if (!rerun) return;
    }
  }

  return {
    wakeAt,
    wakeNow: () => wakeAt(localNow()),
    async stop() {
      stopped = true;
      cancelPlan();
      if (running) await running;
    },
  };
}
