// GET /metrics as a route table: the cached exposition (at most one collection
// a second, shared by the scrapes meanwhile), behind a bearer token when one is
// given; and the app of its own listener, for when it is kept off the API port.
import express, { type Express, type RequestHandler } from 'express';
import helmet from 'helmet';
import type { RateLimit } from '../rate-limit.js';
import type { Logger } from '../logger.js';
import type { Metrics } from '../metrics.js';
import { errorMiddleware, notFound } from './error-middleware.js';
import { methodNotAllowed } from './method-not-allowed.js';
import { type RouteTable, route, routerOf } from './route.js';

export function metricsRoutes(metrics: Metrics, token?: string): RouteTable {
  return {
    tag: 'metrics',
    description: 'Prometheus metrics of this instance.',
    ...(token && { bearer: { prefix: '/metrics', token, what: 'metrics token' } }),
    routes: [
      route({
        method: 'get',
        path: '/metrics',
        auth: 'public',
        summary: 'Prometheus metrics (text exposition format), at most a second old',
        description: 'Needs `Authorization: Bearer <METRICS_TOKEN>` when METRICS_TOKEN is set; served on its own port instead when METRICS_PORT is.',
        responses: { 200: { description: 'the metrics', contentType: metrics.registry.contentType } },
        handle: async (_input, res) => {
          res.type(metrics.registry.contentType).send(await metrics.exposition());
        },
      }),
    ],
  };
}

/** The app of the metrics listener (METRICS_PORT): /metrics and nothing else, limited per address as on the API port. */
export function metricsApp(o: {
  readonly metrics: Metrics;
  readonly token?: string;
  readonly log: Logger;
  readonly publicLimit?: RequestHandler;
  readonly failures?: RateLimit;
}): Express {
  const app = express();
  app.use(helmet());
  app.set('etag', false);
  const table = metricsRoutes(o.metrics, o.token);
  app.use(routerOf(table, undefined, { publicLimit: o.publicLimit, failures: o.failures }));
  app.use(methodNotAllowed([table]));
  app.use(notFound);
  app.use(errorMiddleware(o.log));
  return app;
}
