// The HTTP application: express with JSON parsing, the route tables (health,
// docs, the modules'), the OpenAPI document built from those same tables, and
// the error funnel. No listen() here, so tests drive it with supertest.
import { randomUUID } from 'node:crypto';
import express, { type Express, type RequestHandler } from 'express';
import type { ApiKeyGuard } from './core/auth/guard.js';
import helmet from 'helmet';
import type { RedisClient } from './core/redis.js';
import type { Db } from './core/db.js';
import type { Metrics } from './core/metrics.js';
import { cors } from './core/http/cors.js';
import { docsRoutes } from './core/http/docs.routes.js';
import { errorMiddleware, notFound } from './core/http/error-middleware.js';
import { methodNotAllowed } from './core/http/method-not-allowed.js';
import { metricsRoutes } from './core/http/metrics.routes.js';
import { type OpenApiDocument, openApiDocument } from './core/http/openapi.js';
import { opsRoutes } from './core/http/ops.routes.js';
import { type RouteTable, routerOf } from './core/http/route.js';
import type { Logger } from './core/logger.js';
import type { RateLimit } from './core/rate-limit.js';

export type AppDeps = {
  readonly log: Logger;
  readonly redis: RedisClient;
  readonly db?: Db;
  /** The domain modules' routes, mounted in this order and described in /openapi.json. */
  readonly routes?: readonly RouteTable[];
  /** Checks the API keys of the routes that need one (every route but the public and admin ones). */
  readonly guard?: ApiKeyGuard;
  /** Browser origins allowed to call the API (CORS_ORIGINS); none: no CORS headers at all. */
  readonly corsOrigins?: readonly string[];
  readonly metrics?: Metrics;
  /** GET /metrics here (the default with `metrics`), behind this bearer token when given; 'elsewhere': its own listener serves it. */
  readonly metricsRoute?: { readonly token?: string } | 'elsewhere';
  /** The per-address limit of the public routes (publicLimit); none: unlimited. */
  readonly publicLimit?: RequestHandler;
  /** The per-address brake failed bearer tokens (admin, metrics) count in, the API keys' one. */
  readonly authFailures?: RateLimit;
  /** Answers 503 OVERLOADED while the event loop runs late (loadShedder), before any route's work. */
  readonly shed?: RequestHandler;
};

const INFO = {
  title: 'Order timeout & reminder service',
  version: '0.1.0',
  description:
    'Delayed work on a Redis delay queue with PostgreSQL as the source of truth: unpaid orders cancelled on time, ' +
    "appointment reminders, parcel batching, and the operators' admin API. Every error is application/problem+json with a stable `code`.",
};

export function createApp(deps: AppDeps): Express {
  const app = express();
  // Security headers on every answer (nosniff, no framing, no referrer, a CSP
  // that runs only this origin's scripts: the docs and dashboard pages have no
  // inline script). No CORS headers unless CORS_ORIGINS lists the page's
  // origin: a browser page of another origin cannot read the API.
  // (No upgrade-insecure-requests: on a plain-HTTP internal host it would turn the docs page's script loads into failing HTTPS ones.)
  app.use(helmet({ contentSecurityPolicy: { directives: { 'img-src': ["'self'", 'data:'], 'connect-src': ["'self'"], 'upgrade-insecure-requests': null } } }));
  app.disable('x-powered-by');
  // API answers change with state; a hash of every body per response buys nothing.
  app.set('etag', false);
  app.set('query parser', 'simple');
  app.use(requestLog(deps.log));
  if (deps.corsOrigins?.length) app.use(cors(deps.corsOrigins));
  if (deps.metrics) app.use(deps.metrics.httpMiddleware());
  // After the log line and the metrics (a shed request is seen), before the routes (no key lookup, limiter call or body read for it).
  if (deps.shed) app.use(deps.shed);
  // Bodies are parsed per route, after its guard (routerOf).

  // Built once, before the first request: a schema that cannot be described fails the start, not /docs.
  const built: { document?: OpenApiDocument } = {};
  const metrics = deps.metrics && deps.metricsRoute !== 'elsewhere' ? [metricsRoutes(deps.metrics, deps.metricsRoute?.token)] : [];
  const tables = [opsRoutes(deps), ...metrics, docsRoutes(() => built.document as OpenApiDocument), ...(deps.routes ?? [])];
  built.document = openApiDocument(INFO, tables);
  const extras = { publicLimit: deps.publicLimit, failures: deps.authFailures };
  for (const table of tables) app.use(routerOf(table, deps.guard, extras));

  app.use(methodNotAllowed(tables));
  app.use(notFound);
  app.use(errorMiddleware(deps.log));
  return app;
}

const REQUEST_ID = /^[A-Za-z0-9._-]{1,128}$/;

/** One structured line per request, under a request id (the caller's X-Request-Id when sane). */
function requestLog(log: Logger): RequestHandler {
  return (req, res, next) => {
    const given = req.get('x-request-id');
    const requestId = given && REQUEST_ID.test(given) ? given : randomUUID();
    res.locals.requestId = requestId;
    res.set('X-Request-Id', requestId);
    const started = performance.now();
    res.on('finish', () => {
      log.info(
        { requestId, method: req.method, path: req.path, status: res.statusCode, ms: Math.round((performance.now() - started) * 10) / 10 },
        'http request',
      );
    });
    next();
  };
}
