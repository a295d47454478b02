// The per-address limit of the routes without a credential (health, readiness,
// metrics, the OpenAPI document, the docs and dashboard pages): anyone can call
// them, so a flood of them must not take the CPU the clients' routes need.
// A local bucket per address in this process, not the Redis limiter: what it
// protects is this instance's own event loop, it must cost no I/O (a Redis call
// per anonymous request would move the flood onto the Redis every route needs),
// and /healthz must answer while Redis is away. With N instances an address
// gets N times the rate overall, each instance its own share.
import type { RequestHandler } from 'express';
import { retryAfterSeconds } from '../rate-limit.js';
import { addressOf } from './client-address.js';
import { sendProblem } from './problem.js';

/** Addresses tracked at most; past it the ones whose bucket is full again are forgotten (as good as never seen). */
const MAX_ADDRESSES = 10_000;

/** Admits `perSecond` a second per address on average and bursts of `burst`; over it 429 RATE_LIMITED with Retry-After. */
export function publicLimit(perSecond: number, burst = perSecond): RequestHandler {
  // GCRA: per address the time its bucket is empty again ("theoretical arrival time"), in ms.
  const interval = 1_000 / perSecond;
  const tolerance = interval * burst;
  const tat = new Map<string, number>();
  const forgetFull = (now: number) => {
    for (const [a, t] of tat) if (t <= now) tat.delete(a);
    if (tat.size >= MAX_ADDRESSES) tat.clear();
  };
  return (req, res, next) => {
    const now = performance.now();
    const address = addressOf(req);
    const emptyAt = Math.max(tat.get(address) ?? now, now) + interval;
    const over = emptyAt - now - tolerance;
    if (over > 0) {
      res.set('Retry-After', retryAfterSeconds(over));
      return sendProblem(res, {
        status: 429,
        code: 'RATE_LIMITED',
        title: 'Too many requests from this address',
        detail: 'retry after Retry-After seconds',
      });
    }
    if (!tat.has(address) && tat.size >= MAX_ADDRESSES) forgetFull(now);
    tat.set(address, emptyAt);
    next();
  };
}
