// The operators' routes for outbound rate limits (queue/limits/): list the
// rules in force (configured, run-time, effective) and the endpoints slowed
// down by their receivers; set or remove a run-time rule of one scope. A
// change is committed to PostgreSQL, then put in Redis, where every worker
// reads it within about a second.
import { z } from 'zod';
import { AppError } from '../../core/errors.js';
import { HTTP_ERRORS, type PathParam, type Route, route } from '../../core/http/route.js';
import { type LimitRule, type QueueLimiter, checkLimit, halvingsAt, scopeProblem } from '../../queue/index.js';
import type { RateLimitStore } from './rate-limits.store.js';

const scope = {
  schema: z.string().refine((s) => scopeProblem(s) === null),
  status: 400,
  code: 'INVALID_RATE_LIMIT_SCOPE',
  message: (v: string) => `${v.slice(0, 100)}: ${scopeProblem(v) ?? ''}; a scope is "<queue>", "<queue>:<job type>" or "endpoint:<key>"`,
} satisfies PathParam;

const limitBodySchema = z
  .object({
    count: z.number().int().min(1).max(1_000_000).meta({ description: 'admissions per interval' }),
    intervalMs: z.number().int().min(1).max(86_400_000).meta({ description: 'the interval (ms)' }),
  })
  .strict()
  .refine((l) => (l.intervalMs * 1_000) / l.count >= 1, 'at most one admission a microsecond');

const ruleJsonSchema = z.object({ scope: z.string(), count: z.number().int(), intervalMs: z.number().int() });
const rateLimitsJsonSchema = z.object({
  configured: z.array(ruleJsonSchema).meta({ description: 'QUEUE_RATE_LIMITS' }),
  runtime: z.array(ruleJsonSchema).meta({ description: 'set here; wins over the configured rule of the same scope' }),
  effective: z.array(ruleJsonSchema),
  slowed: z.array(
    z.object({
      endpoint: z.string(),
      holdUntil: z.iso.datetime().meta({ description: 'nothing goes to the endpoint before this' }),
      halvings: z.number().int().meta({ description: 'halvings of its rate in force now (one undone per recovery step after the hold)' }),
    }),
  ),
  adaptive: z.object({ maxHoldMs: z.number().int(), maxHalvings: z.number().int(), recoveryMs: z.number().int() }),
});

const json = (r: LimitRule) => ({ scope: r.scope, count: r.count, intervalMs: r.intervalMs });

export function rateLimitRoutes(deps: { limiter: QueueLimiter; store: RateLimitStore }): Route[] {
  const { limiter, store } = deps;
  return [
    route({
      method: 'get',
      path: '/admin/rate-limits',
      auth: 'admin',
      summary: 'Outbound rate limits: the configured and run-time rules, those in force, and the endpoints their receivers slowed down',
      responses: { 200: { description: 'the rate limits', schema: rateLimitsJsonSchema } },
      errors: [HTTP_ERRORS.REDIS_UNAVAILABLE],
      handle: async (_input, res) => {
        await limiter.refresh();
        const r = limiter.rules();
        const now = Date.now();
        const slowed = [...limiter.slowed()].map(([endpoint, s]) => ({
          endpoint,
          holdUntil: new Date(s.until).toISOString(),
          halvings: halvingsAt(s, limiter.adaptive.recoveryMs, now),
        }));
        res.json({
          configured: r.configured.map(json),
          runtime: r.runtime.map(json),
          effective: r.effective.map(json),
          slowed,
          adaptive: limiter.adaptive,
        });
      },
    }),
    route({
      method: 'put',
      path: '/admin/rate-limits/:scope',
      auth: 'admin',
      summary:
        'Set the run-time rate limit of a queue, a job type ("<queue>:<type>") or an endpoint ("endpoint:<key>"); every worker applies it within about a second',
      params: { scope },
      body: limitBodySchema,
      responses: { 200: { description: 'the rule set', schema: ruleJsonSchema } },
      errors: [HTTP_ERRORS.DATABASE_UNAVAILABLE],
      handle: async ({ params, body }, res) => {
        const rule = { scope: params.scope, ...checkLimit(body) };
        await store.put(rule);
        res.json(json(rule));
      },
    }),
    route({
      method: 'delete',
      path: '/admin/rate-limits/:scope',
      auth: 'admin',
      summary: "Remove a scope's run-time rate limit (its configured one, if any, applies again)",
      params: { scope },
      responses: { 204: { description: 'removed' } },
      errors: [{ status: 404, code: 'RATE_LIMIT_NOT_FOUND' }, HTTP_ERRORS.DATABASE_UNAVAILABLE],
      handle: async ({ params }, res) => {
        if (!(await store.remove(params.scope))) throw new AppError('RATE_LIMIT_NOT_FOUND', 404, `no run-time rate limit for ${params.scope}`);
        res.status(204).end();
      },
    }),
  ];
}
