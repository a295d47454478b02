// How many claimed jobs a worker may hold beyond the ones running. A small
// buffer keeps claimed jobs available to other workers and bounds what waits
// under a lease; a large one amortises each claim round trip over more jobs.
// The budget follows the recent completion rate: about `workMs` of work, never
// below the base (the old fixed default) nor above the cap. A backlog of fast
// jobs therefore gets large claims, while slow jobs keep the buffer small, so
// a busy worker never hoards more than a few tens of ms of another's work.
import { localNow } from '../wake/server-clock.js';

export type PrefetchBudget = {
  /** Count one finished job. */
  completed(): void;
  /** The current budget (jobs). */
  current(): number;
};

const WINDOW_MS = 100;

export function fixedPrefetch(n: number): PrefetchBudget {
  return { completed() {}, current: () => n };
}

export function adaptivePrefetch(o: { base: number; max: number; workMs: number }): PrefetchBudget {
  let windowStart = localNow();
  let done = 0;
  let ratePerMs = 0;
  return {
    completed() {
      done++;
    },
    current() {
      const now = localNow();
      const elapsed = now - windowStart;
      if (elapsed >= WINDOW_MS) {
        // The old rate halves per window elapsed: a backlog raises the budget
        // within a few windows, and after an idle spell it starts from what
        // that spell saw (nothing), not from the last busy moment.
        const keep = 0.5 ** (elapsed / WINDOW_MS);
        ratePerMs = ratePerMs * keep + (done / elapsed) * (1 - keep);
        windowStart = now;
        done = 0;
      }
      return Math.min(o.max, Math.max(o.base, Math.round(ratePerMs * o.workMs)));
    },
  };
}
