// Bearer-token guard (the admin token, the metrics token): compares digests in
// constant time, so the time taken says nothing about how much of a guessed
// token was right. Wrong tokens count in the per-address failure brake the API
// keys use: past it the address gets 429, and only the right token, when this
// instance has seen it lately, still passes (as a known-good key does).
import { createHash, timingSafeEqual } from 'node:crypto';
import type { RequestHandler } from 'express';
import { KNOWN_GOOD_MS, brakeAdmits, countFailure } from '../auth/failure-brake.js';
import type { RateLimit } from '../rate-limit.js';
import { addressOf } from './client-address.js';
import { sendProblem } from './problem.js';

const digest = (s: string) => createHash('sha256').update(s).digest();

/** `what` names the token in the 401's title; `failures` is the per-address brake (none: wrong tokens are only refused). */
export function bearerAuth(token: string, o: { readonly what?: string; readonly failures?: RateLimit } = {}): RequestHandler {
  const expected = digest(token);
  let seenValidAt = -Infinity;
  return async (req, res, next) => {
    // The scheme name is case-insensitive (RFC 9110); the token is not.
    const m = /^Bearer +(\S+)$/i.exec(req.get('authorization') ?? '');
    // No token at all costs nothing and is not counted (counting it would let anyone brake an address).
    const right = m ? timingSafeEqual(digest(m[1] as string), expected) : false;
    if (m && o.failures) {
      const address = addressOf(req);
      if (!(await brakeAdmits(o.failures, address, right && seenValidAt > Date.now() - KNOWN_GOOD_MS, res))) return;
      if (!right && !(await countFailure(o.failures, address, res))) return;
    }
    if (right) {
      seenValidAt = Date.now();
      return next();
    }
    res.set('WWW-Authenticate', 'Bearer');
    sendProblem(res, { status: 401, code: 'UNAUTHORIZED', title: `A valid ${o.what ?? 'admin token'} is required` });
  };
}
