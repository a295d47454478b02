// What the API keys and the bearer tokens (admin, metrics) share of the
// per-address brake on failed authentications: its two steps around a
// credential's check, its answer, and how long a credential seen valid still
// passes a braked address.
import type { Response } from 'express';
import { sendProblem } from '../http/problem.js';
import { type RateLimit, type Verdict, retryAfterSeconds } from '../rate-limit.js';

/** A credential seen valid this recently still passes from a braked address (a stranger's failures cannot lock out who shares it). */
export const KNOWN_GOOD_MS = 15 * 60_000;

/**
 * Before a credential is checked: whether `address` may try it. Past its
 * limit it may not (429 answered, false), unless the credential is one seen
 * valid lately (`knownGood`).
 */
export async function brakeAdmits(failures: RateLimit, address: string, knownGood: boolean, res: Response): Promise<boolean> {
  return knownGood || answered(await failures.check(address), res);
}

/** After a wrong credential: the failure counted; false when that put the address past its limit (429 answered). */
export async function countFailure(failures: RateLimit, address: string, res: Response): Promise<boolean> {
  return answered(await failures.take(address), res);
}

function answered(verdict: Verdict, res: Response): boolean {
  if (verdict.ok) return true;
  res.set('Retry-After', retryAfterSeconds(verdict.retryAfterMs));
  sendProblem(res, { status: 429, code: 'TOO_MANY_AUTH_FAILURES', title: 'Too many failed authentications from this address' });
  return false;
}
