// The API-key guard in front of every client route: a missing, malformed,
// unknown or revoked key is 401 (with WWW-Authenticate: Bearer), a key without
// the route's scope 403 naming it, a key over its rate 429 with Retry-After.
// A checked key is remembered for CACHE_MS, so a revocation holds on every
// instance within that time and a busy client costs one database read per
// instance per CACHE_MS. Failed attempts from one address are counted; past
// their limit that address gets 429 instead of a database lookup.
import { isIP } from 'node:net';
import type { Request, RequestHandler, Response } from 'express';
import type { Logger } from '../logger.js';
import { type RateLimit, retryAfterSeconds } from '../rate-limit.js';
import { sendProblem } from '../http/problem.js';
import { type ApiKeyStore, type Client, parseKey } from './api-keys.js';
import type { Scope } from './scopes.js';

/** How long a checked key (valid or not) is believed: the bound on how late a revocation takes effect. */
export const CACHE_MS = 500;
const CACHE_MAX = 10_000;
const TOUCH_EVERY_MS = 60_000;
const BEARER = /^Bearer +(\S+)$/i;

export type ApiKeyGuard = {
  /** Middleware admitting only a valid key holding `scope`; it leaves the client in res.locals.client. */
  require(scope: Scope): RequestHandler;
};

export function apiKeyGuard(o: {
  readonly keys: Pick<ApiKeyStore, 'verify' | 'touch'>;
  /** Per key id. */
  readonly perKey: RateLimit;
  /** Failed attempts per address. */
  readonly failures: RateLimit;
  readonly log: Pick<Logger, 'warn'>;
}): ApiKeyGuard {
  const cache = new Map<string, { client: Client | null; until: number }>();
  const inFlight = new Map<string, Promise<Client | null>>();
  const touched = new Map<string, number>();

  const lookUp = (key: string, hash: string): Promise<Client | null> => {
    const now = Date.now();
    const hit = cache.get(hash);
    if (hit && hit.until > now) return Promise.resolve(hit.client);
    const running = inFlight.get(hash);
    if (running) return running;
    const p = o.keys
      .verify(key)
      .then((client) => {
        if (cache.size >= CACHE_MAX) cache.clear();
        cache.set(hash, { client, until: Date.now() + CACHE_MS });
        return client;
      })
      .finally(() => inFlight.delete(hash));
    inFlight.set(hash, p);
    return p;
  };

  const touch = (client: Client) => {
    const now = Date.now();
    if ((touched.get(client.id) ?? 0) > now - TOUCH_EVERY_MS) return;
    if (touched.size >= CACHE_MAX) touched.clear();
    touched.set(client.id, now);
    o.keys.touch(client.id).catch((err: unknown) => o.log.warn({ err, keyId: client.id }, 'recording a key as used failed'));
  };

  const refuse = async (req: Request, res: Response, detail: string) => {
    const verdict = await o.failures.take(addressOf(req));
    if (!verdict.ok) return tooManyFailures(res, verdict.retryAfterMs);
    res.set('WWW-Authenticate', 'Bearer');
    sendProblem(res, { status: 401, code: 'UNAUTHORIZED', title: 'A valid API key is required', detail });
  };

  return {
    require(scope) {
      return async (req, res, next) => {
        const m = BEARER.exec(req.get('authorization') ?? '');
        const key = m?.[1];
        const parsed = key ? parseKey(key) : null;
        if (!key || !parsed) return refuse(req, res, key ? 'that is not an API key' : 'send Authorization: Bearer <API key>');
        let client: Client | null;
        const cached = cache.get(parsed.hash);
        if (cached && cached.until > Date.now()) client = cached.client;
        else {
          // Not known here: an address past its failure limit gets no lookup.
          const verdict = await o.failures.check(addressOf(req));
          if (!verdict.ok) return tooManyFailures(res, verdict.retryAfterMs);
          client = await lookUp(key, parsed.hash);
        }
        if (!client) return refuse(req, res, 'this API key is unknown or revoked');
        if (!client.scopes.has(scope)) {
          res.set('WWW-Authenticate', `Bearer error="insufficient_scope", scope="${scope}"`);
          return sendProblem(res, {
            status: 403,
            code: 'INSUFFICIENT_SCOPE',
            title: 'This API key lacks the scope this route needs',
            detail: `missing scope: ${scope}`,
            extra: { scope },
          });
        }
        const verdict = await o.perKey.take(client.id.replaceAll('-', ''));
        if (!verdict.ok) {
          res.set('Retry-After', retryAfterSeconds(verdict.retryAfterMs));
          return sendProblem(res, {
            status: 429,
            code: 'RATE_LIMITED',
            title: 'Too many requests for this API key',
            detail: 'retry after Retry-After seconds',
          });
        }
        touch(client);
        res.locals.client = client;
        next();
      };
    },
  };
}

function tooManyFailures(res: Response, ms: number): void {
  res.set('Retry-After', retryAfterSeconds(ms));
  sendProblem(res, { status: 429, code: 'TOO_MANY_AUTH_FAILURES', title: 'Too many failed authentications from this address' });
}

/** The peer's address as a bucket name: an IP, or "unknown" (never the raw header). */
function addressOf(req: Request): string {
  const ip = req.socket.remoteAddress ?? '';
  return isIP(ip) ? ip.replaceAll(':', '_') : 'unknown';
}

/** The client a guarded route was called by (set by the guard). */
export function clientOf(res: Response): Client | null {
  return (res.locals.client as Client | undefined) ?? null;
}
