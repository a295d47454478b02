// The operators' queue controls: pause and resume a queue or one of its job
// types, and read the pause state with its audit (docs/api/admin.md, Queue
// controls; docs/operations.md, Pausing a queue). Token protected like the
// rest of /admin.
import { z } from 'zod';
import { plainText } from '../../core/http/plain-text.js';
import { HTTP_ERRORS, type PathParam, type RouteTable, route } from '../../core/http/route.js';
import type { QueueControls } from './queue-controls.service.js';

const JOB_TYPE = /^[A-Za-z0-9_.:-]{1,64}$/;

const controlBodySchema = z.strictObject({
  type: z.string().regex(JOB_TYPE, 'a job type: 1..64 of A-Z a-z 0-9 _ . : -').optional().meta({ description: 'only this job type; absent: the whole queue' }),
  by: plainText(1, 64).default('admin').meta({ description: 'who acts, for the audit' }),
  reason: plainText(1, 500).optional().meta({ description: 'why, for the audit' }),
});

const controlsJsonSchema = z.object({
  queue: z.string(),
  /** The whole queue is paused in every shard. */
  paused: z.boolean(),
  pausedTypes: z.array(z.string()),
  /** Paused in some shards only: a write that did not reach every shard (the pause check re-applies pauses). */
  partial: z.array(z.string()),
});
const changeJsonSchema = controlsJsonSchema.extend({ changed: z.boolean().meta({ description: 'false: it was already so' }) });
const auditJsonSchema = z.object({
  controls: controlsJsonSchema,
  audit: z.array(
    z.object({
      at: z.iso.datetime(),
      actor: z.string(),
      type: z.string().meta({ description: "'*' for the whole queue" }),
      action: z.enum(['PAUSE', 'RESUME', 'REAPPLY']),
      reason: z.string().nullable(),
    }),
  ),
});

const UNKNOWN_JOB_TYPE = { status: 422, code: 'UNKNOWN_JOB_TYPE' };

export function queueControlRoutes(deps: { readonly controls: QueueControls; readonly queueNames: readonly string[]; readonly token: string }): RouteTable {
  const name = {
    schema: z.enum(deps.queueNames as [string, ...string[]]),
    status: 404,
    code: 'QUEUE_NOT_FOUND',
    message: (v: string) => `no queue named ${v}`,
  } satisfies PathParam;
  const { controls } = deps;
  return {
    tag: 'admin',
    errors: [HTTP_ERRORS.REDIS_UNAVAILABLE, HTTP_ERRORS.DATABASE_UNAVAILABLE],
    bearer: { prefix: '/admin', token: deps.token },
    routes: [
      route({
        method: 'post',
        path: '/admin/queues/:name/pause',
        auth: 'admin',
        summary: 'Pause a queue, or one job type of it: nothing more is claimed; new jobs are accepted and keep their due times',
        description: 'Idempotent: pausing a paused queue answers 200 with the same state (changed false). Jobs already claimed run to their end.',
        params: { name },
        body: controlBodySchema,
        bodyOptional: true,
        responses: { 200: { description: 'the queue’s pause state', schema: changeJsonSchema } },
        errors: [UNKNOWN_JOB_TYPE],
        handle: async ({ params, body }, res) => {
          res.json(await controls.pause(params.name, body));
        },
      }),
      route({
        method: 'post',
        path: '/admin/queues/:name/resume',
        auth: 'admin',
        summary: 'Resume a paused queue or job type: its backlog runs at full rate in due order, workers woken at once',
        description: 'Idempotent: resuming a queue that is not paused answers 200 with the same state (changed false).',
        params: { name },
        body: controlBodySchema,
        bodyOptional: true,
        responses: { 200: { description: 'the queue’s pause state', schema: changeJsonSchema } },
        errors: [UNKNOWN_JOB_TYPE],
        handle: async ({ params, body }, res) => {
          res.json(await controls.resume(params.name, body));
        },
      }),
      route({
        method: 'get',
        path: '/admin/queues/:name/controls',
        auth: 'admin',
        summary: 'A queue’s pause state and its latest pause, resume and re-apply actions (newest first, at most 50)',
        params: { name },
        responses: { 200: { description: 'state and audit', schema: auditJsonSchema } },
        handle: async ({ params }, res) => {
          const [state, audit] = await Promise.all([controls.view(params.name), controls.audit(params.name, 50)]);
          res.json({
            controls: state,
            audit: audit.map((a) => ({ at: a.at.toISOString(), actor: a.actor, type: a.type, action: a.action, reason: a.reason })),
          });
        },
      }),
    ],
  };
}
