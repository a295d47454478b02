// The operators' API, token protected: queue depths and lag, job lookup, dead
// letters (list, redrive, delete), run a job now or cancel it, lateness over
// the last minutes and the latest parcel batches.
import { z } from 'zod';
import type { ApiKeyStore } from '../../core/auth/api-keys.js';
import type { ClientWebhookSecrets } from '../../core/client-webhook-secrets.js';
import { AppError } from '../../core/errors.js';
import { redisCall } from '../../core/redis-call.js';
import { HTTP_ERRORS, type PathParam, type Route, type RouteTable, route } from '../../core/http/route.js';
import { LATENESS_BUCKETS_MS, QueueInputError, type JobInfo, type LatenessReader, type Queue } from '../../queue/index.js';
import { apiKeyRoutes } from './api-keys.routes.js';
import { clientSecretRoutes } from './client-secrets.routes.js';
import { rateLimitRoutes } from './rate-limits.routes.js';
import { type RedriveRecord, redriveOldest, redriveOne } from './redrive.js';
import {
  JOB_ID_MESSAGE,
  type JobJson,
  batchesQuerySchema,
  dailyReportsJsonSchema,
  deadPageJsonSchema,
  deadQuerySchema,
  jobIdSchema,
  jobJsonSchema,
  latenessJsonSchema,
  latenessQuerySchema,
  queuesJsonSchema,
  recentBatchesJsonSchema,
  redriveAllQuerySchema,
  reportsQuerySchema,
} from './admin.schemas.js';

/** A parcel batch as the dashboard lists it; the parcels module provides them through the composition root. */
export type RecentBatch = {
  readonly id: string;
  readonly client: string;
  readonly areaCode: string;
  readonly vehiclePlate: string;
  readonly reason: 'FULL' | 'TIMEOUT' | 'MANUAL';
  readonly parcelCount: number;
  readonly createdAt: Date;
};

type Figures = NonNullable<z.infer<typeof dailyReportsJsonSchema>['reports'][number]['figures']>;

/** A daily report as the reports module stores it: every client's figures, and each client's with any row that day. */
type ListedReport = {
  readonly day: string;
  readonly timezone: string;
  readonly generatedAt: Date;
  readonly figures: Figures & { readonly clients?: Readonly<Record<string, Figures>> };
};

/** A client's figures on a day it had no row. */
const NO_FIGURES: Figures = {
  orders: { created: 0, paid: 0, paidCents: 0, cancelledTimeout: 0, cancelledCustomer: 0 },
  reminders: { written: 0, sent: 0, failed: 0 },
  notifications: { sent: 0, failed: 0 },
  parcels: { received: 0, batched: 0, maxWaitSeconds: null, avgWaitSeconds: null },
  batches: { full: 0, timeout: 0 },
};

export type AdminDeps = {
  readonly queues: readonly Queue[];
  /** The clients' API keys, which operators make and revoke here. */
  readonly keys: ApiKeyStore;
  /** The clients' webhook signing secrets (their timers' calls), which operators make and delete here. */
  readonly secrets: ClientWebhookSecrets;
  /** Per queue name, how its module records an operator's redrive (ServiceModule.redrives). */
  readonly redrives?: Readonly<Record<string, RedriveRecord>>;
  readonly token: string;
  readonly lateness: LatenessReader;
  /** The latest batches, of one client when given. */
  readonly recentBatches: (limit: number, client?: string) => Promise<readonly RecentBatch[]>;
  /** The latest daily reports, newest day first; the reports module provides them. */
  readonly dailyReports: (limit: number) => Promise<readonly ListedReport[]>;
  /** The outbound rate limits (GET/PUT/DELETE /admin/rate-limits); none: the routes are absent. */
  readonly rateLimits?: Parameters<typeof rateLimitRoutes>[0];
};

const JOB_NOT_FOUND = { status: 404, code: 'JOB_NOT_FOUND' };
const INVALID_JOB_ID = { status: 400, code: 'INVALID_JOB_ID' };

export function adminRoutes(deps: AdminDeps): RouteTable {
  const byName = new Map(deps.queues.map((q) => [q.name, q]));
  const names = deps.queues.map((q) => q.name);
  const name = {
    schema: z.enum(names as [string, ...string[]]),
    status: 404,
    code: 'QUEUE_NOT_FOUND',
    message: (v: string) => `no queue named ${v}`,
  } satisfies PathParam;
  const id = { schema: jobIdSchema, ...INVALID_JOB_ID, message: () => JOB_ID_MESSAGE } satisfies PathParam;
  const queueOf = (n: string) => byName.get(n) as Queue; // the enum above admits only these names
  const ok = (description: string, schema: z.ZodType) => ({ 200: { description, schema } });
  const status = <S extends string>(s: S) => z.object({ status: z.literal(s) });

  const routes: Route[] = [
    route({
      method: 'get',
      path: '/admin/queues',
      auth: 'admin',
      summary: 'Every queue with its shards: pending, due now, in flight, dead, next due time, oldest due lag',
      responses: ok('the queues', queuesJsonSchema),
      handle: async (_input, res) => {
        const all = await guard(() => Promise.all(deps.queues.map((q) => q.overview())));
        res.json({ queues: all });
      },
    }),
    route({
      method: 'get',
      path: '/admin/queues/:name/jobs/:id',
      auth: 'admin',
      summary: 'A job: state, due time, attempts, last error, payload',
      params: { name, id },
      responses: ok('the job', jobJsonSchema),
      errors: [JOB_NOT_FOUND],
      handle: async ({ params }, res) => {
        const job = await guard(() => queueOf(params.name).get(params.id));
        if (!job) throw new AppError('JOB_NOT_FOUND', 404, 'no such job');
        res.json(jobJson(job));
      },
    }),
    route({
      method: 'post',
      path: '/admin/queues/:name/jobs/:id/run-now',
      auth: 'admin',
      summary: 'Make a pending or in-flight job due now',
      params: { name, id },
      responses: ok('rescheduled', status('rescheduled').extend({ dueAt: z.iso.datetime() })),
      errors: [JOB_NOT_FOUND],
      handle: async ({ params }, res) => {
        const r = await guard(() => queueOf(params.name).reschedule(params.id, { delayMs: 0 }));
        if (r.status === 'not_found') throw new AppError('JOB_NOT_FOUND', 404, 'no pending or in-flight job with this id');
        res.json({ status: 'rescheduled', dueAt: new Date(r.dueAt).toISOString() });
      },
    }),
    route({
      method: 'delete',
      path: '/admin/queues/:name/jobs/:id',
      auth: 'admin',
      summary: 'Cancel a job, whatever its state',
      params: { name, id },
      responses: ok('cancelled', status('cancelled').extend({ was: z.enum(['pending', 'in_flight', 'dead']) })),
      errors: [JOB_NOT_FOUND],
      handle: async ({ params }, res) => {
        const c = await guard(() => queueOf(params.name).cancel(params.id));
        if (!c.cancelled) throw new AppError('JOB_NOT_FOUND', 404, 'no such job');
        res.json({ status: 'cancelled', was: c.state });
      },
    }),
    route({
      method: 'get',
      path: '/admin/queues/:name/dead',
      auth: 'admin',
      summary: 'Dead jobs with their last error, oldest death first, a page at a time',
      query: deadQuerySchema,
      params: { name },
      responses: ok('a page of dead jobs', deadPageJsonSchema),
      errors: [{ status: 400, code: 'INVALID_OPTIONS' }],
      handle: async ({ query, params }, res) => {
        const page = await guard(() => queueOf(params.name).listDead(query.cursor ?? null, query.limit));
        res.json({ jobs: page.jobs.map(jobJson), next: page.next });
      },
    }),
    route({
      method: 'post',
      path: '/admin/queues/:name/dead/redrive',
      auth: 'admin',
      summary: 'Redrive the oldest dead jobs (at most `max` per shard; `max` in all for a queue whose module records redrives)',
      query: redriveAllQuerySchema,
      params: { name },
      responses: ok('how many were redriven', z.object({ redriven: z.int().min(0) })),
      errors: [HTTP_ERRORS.DATABASE_UNAVAILABLE],
      handle: async ({ query, params }, res) => {
        res.json({ redriven: await redriveOldest(queueOf(params.name), deps.redrives?.[params.name], query.max, guard) });
      },
    }),
    route({
      method: 'post',
      path: '/admin/queues/:name/dead/:id/redrive',
      auth: 'admin',
      summary: 'Redrive one dead job: due now, attempts counted afresh',
      params: { name, id },
      responses: ok('redriven', status('redriven')),
      errors: [JOB_NOT_FOUND, HTTP_ERRORS.DATABASE_UNAVAILABLE],
      handle: async ({ params }, res) => {
        const done = await redriveOne(queueOf(params.name), deps.redrives?.[params.name], params.id, guard);
        if (!done) throw new AppError('JOB_NOT_FOUND', 404, 'no dead job with this id');
        res.json({ status: 'redriven' });
      },
    }),
    route({
      method: 'delete',
      path: '/admin/queues/:name/dead/:id',
      auth: 'admin',
      summary: 'Delete one dead job',
      params: { name, id },
      responses: ok('deleted', status('deleted')),
      errors: [JOB_NOT_FOUND],
      handle: async ({ params }, res) => {
        if (!(await guard(() => queueOf(params.name).deleteDead(params.id)))) throw new AppError('JOB_NOT_FOUND', 404, 'no dead job with this id');
        res.json({ status: 'deleted' });
      },
    }),
    route({
      method: 'get',
      path: '/admin/lateness',
      auth: 'admin',
      summary: 'How late jobs started (start minus due), per queue and second, over the last minutes',
      description: 'Written by the workers, wherever they run, about once a second; kept 15 minutes.',
      query: latenessQuerySchema,
      responses: ok('a series per queue', latenessJsonSchema),
      handle: async ({ query }, res) => {
        const to = Date.now();
        const from = to - query.minutes * 60_000;
        const queues = await guard(() => deps.lateness.read(names, from, to));
        res.json({ from: new Date(from).toISOString(), to: new Date(to).toISOString(), bucketsMs: LATENESS_BUCKETS_MS, queues });
      },
    }),
    route({
      method: 'get',
      path: '/admin/batches',
      auth: 'admin',
      summary: "The latest parcel batches of every client's areas (or of one client's, with ?client=), newest first",
      query: batchesQuerySchema,
      responses: ok('the batches', recentBatchesJsonSchema),
      errors: [{ status: 503, code: 'DATABASE_UNAVAILABLE' }],
      handle: async ({ query }, res) => {
        const batches = await deps.recentBatches(query.limit, query.client);
        res.json({
          batches: batches.map((b) => ({
            id: b.id,
            client: b.client,
            area: b.areaCode,
            vehiclePlate: b.vehiclePlate,
            reason: b.reason,
            parcels: b.parcelCount,
            createdAt: b.createdAt.toISOString(),
          })),
        });
      },
    }),
    route({
      method: 'get',
      path: '/admin/reports',
      auth: 'admin',
      summary: "The latest daily reports (DAILY_REPORT_CRON), newest day first: every client's figures, or one client's with ?client=",
      query: reportsQuerySchema,
      responses: ok('the reports', dailyReportsJsonSchema),
      errors: [{ status: 503, code: 'DATABASE_UNAVAILABLE' }],
      handle: async ({ query }, res) => {
        const reports = await deps.dailyReports(query.limit);
        res.json({
          reports: reports.map(({ figures: { clients, ...all }, ...r }) => ({
            ...r,
            generatedAt: r.generatedAt.toISOString(),
            // An own property only: a client id may spell a name every object inherits (constructor, toString).
            figures: query.client === undefined ? all : clients ? (Object.hasOwn(clients, query.client) ? clients[query.client] : NO_FIGURES) : null,
          })),
        });
      },
    }),
    ...apiKeyRoutes(deps.keys),
    ...clientSecretRoutes(deps.secrets),
    ...(deps.rateLimits ? rateLimitRoutes(deps.rateLimits) : []),
  ];
  return {
    tag: 'admin',
    description: 'The operators’ API. Needs `Authorization: Bearer <ADMIN_TOKEN>`; absent when ADMIN_TOKEN is unset.',
    errors: [HTTP_ERRORS.REDIS_UNAVAILABLE],
    routes,
    bearer: { prefix: '/admin', token: deps.token },
  };
}

/**
 * A Redis read or change of the admin API: bounded in time (a hung Redis is a
 * 503 REDIS_UNAVAILABLE within a second, not a hung request), and the engine's
 * refusal of a job id or cursor is the client's mistake, a 400.
 */
async function guard<T>(f: () => Promise<T>): Promise<T> {
  try {
    return await redisCall(f(), 'admin queue call');
  } catch (err) {
    if (err instanceof QueueInputError) throw new AppError(err.code, 400, err.message);
    throw err;
  }
}

function jobJson(j: JobInfo): JobJson {
  const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());
  return { ...j, dueAt: iso(j.dueAt), leaseUntil: iso(j.leaseUntil), diedAt: iso(j.diedAt) };
}
