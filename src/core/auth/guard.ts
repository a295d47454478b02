// The API-key guard in front of every client route: a missing, malformed,
// unknown or revoked key is 401 (with WWW-Authenticate: Bearer), a key without
// the route's scope 403 naming it, a key over its rate 429 with Retry-After.
// A checked key is believed until CACHE_MS after its lookup started (the
// database read it as of then), and a request joins a running lookup only if
// that started less than CACHE_MS ago: a revocation holds on every instance
// within CACHE_MS of its commit (1 s promised), however slow the lookup, and a
// busy client costs one database read per instance per CACHE_MS. Well-formed
// keys that fail are counted per address; past their limit that address gets
// 429 instead of lookups, except for keys this instance has seen valid lately
// (a stranger's failures cannot lock out the clients sharing its address).
import { isIP } from 'node:net';
import type { Request, RequestHandler, Response } from 'express';
import type { Logger } from '../logger.js';
import { type RateLimit, retryAfterSeconds } from '../rate-limit.js';
import { sendProblem } from '../http/problem.js';
import { type ApiKeyStore, type Client, parseKey } from './api-keys.js';
import type { Scope } from './scopes.js';

/** How long a lookup's verdict (valid or not) is believed, from the lookup's start: the bound on how late a revocation takes effect. */
export const CACHE_MS = 500;
/** A key seen valid this recently is looked up even from a braked address. */
const KNOWN_GOOD_MS = 15 * 60_000;
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
  const inFlight = new Map<string, { started: number; verdict: Promise<Client | null> }>();
  const touched = new Map<string, number>();
  const knownGood = new Map<string, number>();

  const cached = (hash: string): Client | null | undefined => {
    const hit = cache.get(hash);
    return hit && hit.until > Date.now() ? hit.client : undefined;
  };

  const lookUp = (key: string, hash: string): Promise<Client | null> => {
    const running = inFlight.get(hash);
    if (running && running.started > Date.now() - CACHE_MS) return running.verdict;
    const started = Date.now();
    const verdict = o.keys.verify(key).then((client) => {
      if (cache.size >= CACHE_MAX) cache.clear();
      cache.set(hash, { client, until: started + CACHE_MS });
      if (client) {
        if (knownGood.size >= CACHE_MAX) knownGood.clear();
        knownGood.set(hash, Date.now());
      } else knownGood.delete(hash);
      return client;
    });
    const entry = { started, verdict };
    inFlight.set(hash, entry);
    void verdict.finally(() => inFlight.get(hash) === entry && inFlight.delete(hash)).catch(() => {});
    return verdict;
  };

  const touch = (client: Client) => {
    const now = Date.now();
    if ((touched.get(client.id) ?? 0) > now - TOUCH_EVERY_MS) return;
    if (touched.size >= CACHE_MAX) touched.clear();
    touched.set(client.id, now);
    o.keys.touch(client.id).catch((err: unknown) => o.log.warn({ err, keyId: client.id }, 'recording a key as used failed'));
  };

  const unauthorized = (res: Response, detail: string) => {
    res.set('WWW-Authenticate', 'Bearer');
    sendProblem(res, { status: 401, code: 'UNAUTHORIZED', title: 'A valid API key is required', detail });
  };

  return {
    require(scope) {
      return async (req, res, next) => {
        const m = BEARER.exec(req.get('authorization') ?? '');
        const key = m?.[1];
        // Nothing to look up: refused at once, and not counted (it costs nothing, and counting it would let anyone brake an address).
        if (!key) return unauthorized(res, 'send Authorization: Bearer <API key>');
        const parsed = parseKey(key);
        if (!parsed) return unauthorized(res, 'that is not an API key');
        let client = cached(parsed.hash);
        if (client === undefined) {
          const address = addressOf(req);
          const good = (knownGood.get(parsed.hash) ?? 0) > Date.now() - KNOWN_GOOD_MS;
          if (!good) {
            const verdict = await o.failures.check(address);
            if (!verdict.ok) return tooManyFailures(res, verdict.retryAfterMs);
          }
          client = await lookUp(key, parsed.hash);
          if (!client) {
            const verdict = await o.failures.take(address);
            if (!verdict.ok) return tooManyFailures(res, verdict.retryAfterMs);
          }
        }
        if (!client) return unauthorized(res, 'this API key is unknown or revoked');
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

/**
 * The peer's address as a bucket name: an IPv4 address, or the /64 of an IPv6
 * one (a host usually holds a whole /64), or "unknown"; never a raw header.
 * Behind a proxy every client shares its address: the brake then only counts
 * that proxy's failures (known-good keys still pass).
 */
function addressOf(req: Request): string {
  const ip = req.socket.remoteAddress ?? '';
  const v4 = /^(?:::ffff:)?(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(ip);
  if (v4 && isIP(v4[1] as string) === 4) return v4[1] as string;
  if (isIP(ip) !== 6) return 'unknown';
  const groups = expandIpv6(ip);
  return groups ? `${groups.slice(0, 4).join('_')}_64` : 'unknown';
}

/** The eight groups of an IPv6 address (without an embedded IPv4 tail), or null. */
function expandIpv6(ip: string): string[] | null {
  const [head, tail, ...more] = ip.toLowerCase().split('::');
  if (more.length > 0 || (head ?? '').includes('.') || (tail ?? '').includes('.')) return null;
  const h = head ? head.split(':') : [];
  const t = tail ? tail.split(':') : [];
  const fill = tail === undefined ? [] : Array<string>(8 - h.length - t.length).fill('0');
  const all = [...h, ...fill, ...t];
  return all.length === 8 ? all.map((g) => g.replace(/^0+(?=.)/, '')) : null;
}

/** The client a guarded route was called by (set by the guard). */
export function clientOf(res: Response): Client | null {
  return (res.locals.client as Client | undefined) ?? null;
}
