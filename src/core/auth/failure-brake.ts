// What the API keys and the bearer tokens (admin, metrics) share of the
// per-address brake on failed authentications: its answer, and how long a
// credential seen valid still passes a braked address.
import type { Response } from 'express';
import { sendProblem } from '../http/problem.js';
import { retryAfterSeconds } from '../rate-limit.js';

/** A credential seen valid this recently still passes from a braked address (a stranger's failures cannot lock out who shares it). */
export const KNOWN_GOOD_MS = 15 * 60_000;

export function tooManyFailures(res: Response, ms: number): void {
  res.set('Retry-After', retryAfterSeconds(ms));
  sendProblem(res, { status: 429, code: 'TOO_MANY_AUTH_FAILURES', title: 'Too many failed authentications from this address' });
}
