// Load shedding: while the event loop runs late by more than a threshold, new
// requests are answered 503 OVERLOADED with Retry-After before any work is
// done for them (no key lookup, no limiter call, no body read). Under overload
// every request waits for every other; answering some at once keeps the
// latency of the rest bounded and the process alive, where queueing them all
// would push each one past its client's timeout.
import { monitorEventLoopDelay } from 'node:perf_hooks';
import type { RequestHandler } from 'express';
import type { Logger } from '../logger.js';
import { sendProblem } from './problem.js';

/** The event loop is sampled this often (ms): the histogram's resolution. */
const RESOLUTION_MS = 10;
/** The delay is judged over windows this long (ms): how fast shedding starts and stops. */
const WINDOW_MS = 500;
const RETRY_AFTER_S = '2';
/**
 * Never shed: liveness (an orchestrator would restart a busy but healthy
 * process, and its peers would take its load on top of theirs) and the
 * metrics (how operators see the overload). Readiness is shed like any route:
 * a busy instance then asks its balancer for less traffic for a moment.
 */
const EXEMPT = new Set(['/healthz', '/metrics']);

export type LoadShedder = {
  readonly middleware: RequestHandler;
  /** Starts watching (once listening: the start's own long turns must not shed the first requests). */
  start(): void;
  stop(): void;
};

/** Sheds requests while the mean event-loop delay of the last window is above `thresholdMs` (0: never). */
export function loadShedder(o: { thresholdMs: number; log: Pick<Logger, 'warn' | 'info'> }): LoadShedder {
  const histogram = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
  let timer: NodeJS.Timeout | undefined;
  let delay = 0;
  let shedding = false;
  let shed = 0;
  let windowStart = performance.now();
  // Windows are told apart by the running count and sum, not by reset():
  // a reset also forgets the last tick, so a stall right after it went unseen.
  let count = 0;
  let sumNs = 0;
  const judge = () => {
    const now = performance.now();
    const n = histogram.count - count;
    const sum = histogram.count > 0 ? histogram.mean * histogram.count : 0;
    // A sample is the time between two ticks of the sampler, so its own tick
    // is taken off; a window without any sample (the loop held the whole
    // time) is as late as this timer.
    const mean = n > 0 ? (sum - sumNs) / n / 1e6 - RESOLUTION_MS : 0;
    const timerLate = now - windowStart - WINDOW_MS;
    delay = Math.max(0, mean, timerLate);
    count = histogram.count;
    sumNs = sum;
    windowStart = now;
    const over = o.thresholdMs > 0 && delay > o.thresholdMs;
    if (over && !shedding) o.log.warn({ delayMs: Math.round(delay), thresholdMs: o.thresholdMs }, 'event loop late: shedding new requests with 503');
    if (!over && shedding) o.log.info({ delayMs: Math.round(delay), shed }, 'event loop on time again: no longer shedding');
    if (!over) shed = 0;
    shedding = over;
  };
  return {
    middleware: (req, res, next) => {
      if (!shedding || EXEMPT.has(req.path)) return next();
      shed++;
      res.set('Retry-After', RETRY_AFTER_S);
      sendProblem(res, { status: 503, code: 'OVERLOADED', title: 'The service is overloaded; retry shortly' });
    },
    start() {
      if (timer || o.thresholdMs <= 0) return;
      histogram.enable();
      count = histogram.count;
      sumNs = count > 0 ? histogram.mean * count : 0;
      windowStart = performance.now();
      timer = setInterval(judge, WINDOW_MS);
      timer.unref();
    },
    stop() {
      clearInterval(timer);
      timer = undefined;
      histogram.disable();
      shedding = false;
    },
  };
}
