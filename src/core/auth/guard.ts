// The API-key guard in front of every client route: a missing, malformed,
// unknown or revoked key is 401 (with WWW-Authenticate: Bearer), a key without
// the route's scope 403 naming it, a key over its rate or its client over the
// client's 429 with Retry-After.
// A checked key is believed until CACHE_MS after its lookup started (the
// database read it as of then), and a request joins a running lookup only if
// that started less than CACHE_MS ago: a revocation holds on every instance
// within CACHE_MS of its commit (1 s promised), however slow the lookup, and a
// busy client costs one database read per instance per CACHE_MS. Well-formed
// keys that fail are counted per address; past their limit that address gets
// 429 instead of lookups, except for keys this instance has seen valid lately
// (a stranger's failures cannot lock out the clients sharing its address).
import type { RequestHandler, Response } from 'express';
import type { Logger } from '../logger.js';
import { type RateLimit, retryAfterSeconds } from '../rate-limit.js';
import { addressOf } from '../http/client-address.js';
import { sendProblem } from '../http/problem.js';
import { KNOWN_GOOD_MS, brakeAdmits, countFailure } from './failure-brake.js';
import { type ApiKeyStore, type Caller, parseKey } from './api-keys.js';
import type { Scope } from './scopes.js';

/** How long a lookup's verdict (valid or not) is believed, from the lookup's start: the bound on how late a revocation takes effect. */
export const CACHE_MS = 500;
const CACHE_MAX = 10_000;
const TOUCH_EVERY_MS = 60_000;
const BEARER = /^Bearer +(\S+)$/i;

export type ApiKeyGuard = {
  /** Middleware admitting only a valid key holding `scope`; it leaves the caller (key and client) in res.locals.caller. */
  require(scope: Scope): RequestHandler;
};

export function apiKeyGuard(o: {
  readonly keys: Pick<ApiKeyStore, 'verify' | 'touch'>;
  /** Per key id. */
  readonly perKey: RateLimit;
  /** Per client (tenant): the keys of one client share it. */
  readonly perClient: RateLimit;
  /** Failed attempts per address. */
  readonly failures: RateLimit;
  readonly log: Pick<Logger, 'warn'>;
}): ApiKeyGuard {
  const cache = new Map<string, { caller: Caller | null; until: number }>();
  const inFlight = new Map<string, { started: number; verdict: Promise<Caller | null> }>();
  const touched = new Map<string, number>();
  const knownGood = new Map<string, number>();

  const cached = (hash: string): Caller | null | undefined => {
    const hit = cache.get(hash);
    return hit && hit.until > Date.now() ? hit.caller : undefined;
  };

  const lookUp = (key: string, hash: string): Promise<Caller | null> => {
    const running = inFlight.get(hash);
    if (running && running.started > Date.now() - CACHE_MS) return running.verdict;
    const started = Date.now();
    const verdict = o.keys.verify(key).then((caller) => {
      if (cache.size >= CACHE_MAX) cache.clear();
      cache.set(hash, { caller, until: started + CACHE_MS });
      if (caller) {
        if (knownGood.size >= CACHE_MAX) knownGood.clear();
        knownGood.set(hash, Date.now());
      } else knownGood.delete(hash);
      return caller;
    });
    const entry = { started, verdict };
    inFlight.set(hash, entry);
    void verdict.finally(() => inFlight.get(hash) === entry && inFlight.delete(hash)).catch(() => {});
    return verdict;
  };

  const touch = (caller: Caller) => {
    const now = Date.now();
    if ((touched.get(caller.id) ?? 0) > now - TOUCH_EVERY_MS) return;
    if (touched.size >= CACHE_MAX) touched.clear();
    touched.set(caller.id, now);
    o.keys.touch(caller.id).catch((err: unknown) => o.log.warn({ err, keyId: caller.id }, 'recording a key as used failed'));
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
        let caller = cached(parsed.hash);
        if (caller === undefined) {
          const address = addressOf(req);
          const good = (knownGood.get(parsed.hash) ?? 0) > Date.now() - KNOWN_GOOD_MS;
          if (!(await brakeAdmits(o.failures, address, good, res))) return;
          caller = await lookUp(key, parsed.hash);
          if (!caller && !(await countFailure(o.failures, address, res))) return;
        }
        if (!caller) return unauthorized(res, 'this API key is unknown or revoked');
        if (!caller.scopes.has(scope)) {
          res.set('WWW-Authenticate', `Bearer error="insufficient_scope", scope="${scope}"`);
          return sendProblem(res, {
            status: 403,
            code: 'INSUFFICIENT_SCOPE',
            title: 'This API key lacks the scope this route needs',
            detail: `missing scope: ${scope}`,
            extra: { scope },
          });
        }
        // Both are taken, in one turn (each bucket's decisions share one script call): a request refused by one still counts in the other.
        const [byKey, byClient] = await Promise.all([o.perKey.take(caller.id.replaceAll('-', '')), o.perClient.take(caller.client)]);
        const refused = !byKey.ok ? byKey : !byClient.ok ? byClient : null;
        if (refused) {
          res.set('Retry-After', retryAfterSeconds(refused.retryAfterMs));
          return sendProblem(res, {
            status: 429,
            code: 'RATE_LIMITED',
            title: byKey.ok ? "Too many requests for this API key's client" : 'Too many requests for this API key',
            detail: 'retry after Retry-After seconds',
          });
        }
        touch(caller);
        res.locals.caller = caller;
        next();
      };
    },
  };
}

/** The caller a guarded route was called by (set by the guard). */
export function callerOf(res: Response): Caller | null {
  return (res.locals.caller as Caller | undefined) ?? null;
}
