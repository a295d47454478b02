// Bearer-token guard: compares digests in constant time, so the time taken
// says nothing about how much of a guessed token was right.
import { createHash, timingSafeEqual } from 'node:crypto';
import type { RequestHandler } from 'express';
import { sendProblem } from './problem.js';

const digest = (s: string) => createHash('sha256').update(s).digest();

export function bearerAuth(token: string): RequestHandler {
  const expected = digest(token);
  return (req, res, next) => {
    // The scheme name is case-insensitive (RFC 9110); the token is not.
    const m = /^Bearer +(\S+)$/i.exec(req.get('authorization') ?? '');
    if (m && timingSafeEqual(digest(m[1] as string), expected)) return next();
    res.set('WWW-Authenticate', 'Bearer');
    sendProblem(res, { status: 401, code: 'UNAUTHORIZED', title: 'A valid admin token is required' });
  };
}
