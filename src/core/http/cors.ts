// CORS, closed unless configured: with no allowed origins no answer carries
// an Access-Control-* header, so a page of another origin cannot read the
// API. With CORS_ORIGINS, an exact listed origin may call it from a browser
// (with its API key in Authorization; no cookies are involved), and its
// preflight is answered 204 here.
import type { RequestHandler } from 'express';

const ALLOWED_HEADERS = 'Authorization, Content-Type, Idempotency-Key, X-Request-Id';
const EXPOSED_HEADERS = 'Location, Idempotent-Replayed, Retry-After, X-Request-Id';
const METHODS = 'GET, POST, PUT, PATCH, DELETE';

export function cors(origins: readonly string[]): RequestHandler {
  const allowed = new Set(origins);
  return (req, res, next) => {
    const origin = req.get('origin');
    if (!origin || !allowed.has(origin)) return next();
    res.vary('Origin');
    res.set('Access-Control-Allow-Origin', origin);
    res.set('Access-Control-Expose-Headers', EXPOSED_HEADERS);
    if (req.method === 'OPTIONS' && req.get('access-control-request-method')) {
      res.set('Access-Control-Allow-Methods', METHODS);
      res.set('Access-Control-Allow-Headers', ALLOWED_HEADERS);
      res.set('Access-Control-Max-Age', '600');
      res.status(204).end();
      return;
    }
    next();
  };
}
