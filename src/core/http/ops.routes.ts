// The service's own endpoints, as a route table: liveness and readiness (Redis
// and PostgreSQL answer). Metrics are metrics.routes.ts's.
import type { RedisClient } from '../redis.js';
import { z } from 'zod';
import type { Db } from '../db.js';
import type { Logger } from '../logger.js';
import { withTimeout } from '../../queue/index.js';
import { sendProblem } from './problem.js';
import { type Route, type RouteTable, route } from './route.js';

export type OpsDeps = { readonly log: Logger; readonly redis: RedisClient; readonly db?: Db };

export function opsRoutes(deps: OpsDeps): RouteTable {
  const routes: Route[] = [
    route({
      method: 'get',
      path: '/healthz',
      auth: 'public',
      summary: 'Liveness: the process answers',
      responses: { 200: { description: 'up', schema: z.object({ status: z.literal('ok') }) } },
      handle: (_input, res) => {
        res.json({ status: 'ok' });
      },
    }),
    route({
      method: 'get',
      path: '/readyz',
      auth: 'public',
      summary: 'Readiness: Redis and PostgreSQL answer within a second',
      responses: { 200: { description: 'ready', schema: z.object({ status: z.literal('ready') }) } },
      errors: [{ status: 503, code: 'NOT_READY' }],
      handle: async (_input, res) => {
        const checks = await Promise.all([
          probe('redis', () => deps.redis.ping(), deps.log),
          deps.db ? probe('postgres', () => deps.db!.$queryRaw`SELECT 1`, deps.log) : null,
        ]);
        const failed = checks.filter((c): c is string => typeof c === 'string');
        if (failed.length === 0) {
          res.json({ status: 'ready' });
          return;
        }
        // `detail` names what did not answer: "redis", "postgres" or both.
        sendProblem(res, { status: 503, code: 'NOT_READY', title: 'A dependency is not answering', detail: failed.join(', ') });
      },
    }),
  ];
  return { tag: 'operations', description: 'Health and readiness of the service.', routes };
}

/** Returns the dependency's name when it does not answer within a second, else true. */
async function probe(name: string, check: () => Promise<unknown>, log?: Logger): Promise<string | true> {
  try {
    await withTimeout(check(), 1_000, `${name} readiness check`);
    return true;
  } catch (err) {
    log?.warn({ err }, `readiness check failed: ${name}`);
    return name;
  }
}
