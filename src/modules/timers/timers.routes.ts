// HTTP edge of the timers: PUT, GET, DELETE one by key, list a client's, and
// a batch of PUTs. Every route is the calling key's client's: another
// client's timer of the same key is another timer.
import { AppError } from '../../core/errors.js';
import { HTTP_ERRORS, type PathParam, type RouteTable, route } from '../../core/http/route.js';
import type { TimerRow } from './sql/reads.js';
import { stateOf } from './sql/reads.js';
import {
  MAX_BATCH,
  type PutTimerInput,
  type TimerJson,
  batchResultJsonSchema,
  listTimersQuerySchema,
  putTimerSchema,
  putTimersBatchSchema,
  timerJsonSchema,
  timerKeySchema,
  timersPageJsonSchema,
} from './timers.schemas.js';
import type { TimersService } from './timers.service.js';

const key = { schema: timerKeySchema, status: 400, code: 'INVALID_TIMER_KEY', message: () => 'a timer key is 1..200 of [A-Za-z0-9_.:-]' } satisfies PathParam;
const NOT_FOUND = { status: 404, code: 'TIMER_NOT_FOUND' };
const TARGET_REFUSED = [
  { status: 422, code: 'TARGET_NOT_ALLOWED' },
  { status: 422, code: 'TARGET_KIND_UNAVAILABLE' },
];
const timer = (description: string) => ({ description, schema: timerJsonSchema });

export function timersRoutes(service: TimersService): RouteTable {
  return {
    tag: 'timers',
    description: 'Timers for any system: a keyed delivery at a time, to a webhook, an AMQP exchange or a NATS JetStream subject.',
    errors: [HTTP_ERRORS.DATABASE_UNAVAILABLE],
    routes: [
      route({
        method: 'put',
        path: '/timers/:key',
        auth: 'timers:write',
        summary: 'Create or change a timer (replace, keep, debounce)',
        description:
          'replace (default) creates the timer or moves its pending firing; keep creates it only if the key is new; debounce pushes the fire time to now + delayMs on every call, never past the first call of the burst + maxWaitMs. A timer delivered, failed or cancelled fires again (201); one being delivered is not moved (409 TIMER_DELIVERING), a debounce starts a new burst.',
        params: { key },
        body: putTimerSchema,
        // A 64 KiB payload written with \\u escapes (as some encoders do) takes up to six times that.
        bodyLimit: '400kb',
        responses: { 201: timer('a new timer, or a new firing of one'), 200: timer('the timer, moved (or, keep: as it was)') },
        errors: [...TARGET_REFUSED, { status: 409, code: 'TIMER_DELIVERING' }],
        handle: async ({ params, body, client }, res) => {
          const r = await service.put(client, params.key, body);
          res.status(r.status).json(toJson(r.timer));
        },
      }),
      route({
        method: 'get',
        path: '/timers/:key',
        auth: 'timers:read',
        summary: 'Read a timer',
        params: { key },
        responses: { 200: timer('the timer and its current firing') },
        errors: [NOT_FOUND],
        handle: async ({ params, client }, res) => {
          res.json(toJson(await service.get(client, params.key)));
        },
      }),
      route({
        method: 'delete',
        path: '/timers/:key',
        auth: 'timers:write',
        summary: 'Cancel a timer',
        description: 'CANCELLED while pending or failed (again: the same answer); 409 while its delivery runs or once delivered.',
        params: { key },
        responses: { 200: timer('the timer, CANCELLED') },
        errors: [NOT_FOUND, { status: 409, code: 'TIMER_DELIVERING' }, { status: 409, code: 'TIMER_DELIVERED' }],
        handle: async ({ params, client }, res) => {
          res.json(toJson(await service.cancel(client, params.key)));
        },
      }),
      route({
        method: 'get',
        path: '/timers',
        auth: 'timers:read',
        summary: "List the client's timers by key",
        query: listTimersQuerySchema,
        queryError: { status: 400, code: 'INVALID_TIMER_QUERY', message: 'state is one of the timer states; prefix and cursor are keys; limit 1..1000' },
        responses: { 200: { description: 'a page of timers in key order; nextCursor continues it', schema: timersPageJsonSchema } },
        handle: async ({ query, client }, res) => {
          const rows = await service.list(client, query);
          const next = rows.length === query.limit ? (rows[rows.length - 1] as TimerRow).key : null;
          res.json({ timers: rows.map(toJson), nextCursor: next });
        },
      }),
      route({
        method: 'post',
        path: '/timers/batch',
        auth: 'timers:write',
        summary: `Create or change up to ${MAX_BATCH} timers`,
        description: 'Each item is a PUT body with its key; each gets the answer its PUT would have had (status, and the timer or the error), in order.',
        body: putTimersBatchSchema,
        bodyLimit: '8mb',
        responses: { 200: { description: 'a result per item, in order', schema: batchResultJsonSchema } },
        handle: async ({ body, client }, res) => {
          type Parsed = { key: string; input: PutTimerInput } | { key: string; error: AppError };
          const parsed = body.timers.map((t, i): Parsed => {
            const { key: k, ...rest } = t;
            if (!timerKeySchema.safeParse(k).success)
              return { key: k, error: new AppError('INVALID_TIMER_KEY', 400, 'a timer key is 1..200 of [A-Za-z0-9_.:-]') };
            const p = putTimerSchema.safeParse(rest);
            if (p.success) return { key: k, input: p.data };
            const errors = p.error.issues.map((x) => ({ path: [`timers`, i, ...x.path].join('.'), message: x.message }));
            return { key: k, error: new AppError('VALIDATION_FAILED', 400, 'The request is not valid', errors) };
          });
          const good = parsed.flatMap((p) => ('input' in p ? [p] : []));
          const done = await service.putMany(client, good);
          let j = 0;
          const results = parsed.map((p) => {
            const r = 'input' in p ? done[j++] : { error: p.error };
            if (!r) throw new Error('putMany answered fewer results than items');
            if ('error' in r) return { key: p.key, status: r.error.status, error: { code: r.error.code, detail: r.error.message } };
            return { key: p.key, status: r.status, timer: toJson(r.timer) };
          });
          res.json({ results });
        },
      }),
    ],
  };
}

function toJson(t: TimerRow): TimerJson {
  const f = t.firing;
  return {
    key: t.key,
    state: stateOf(t),
    fireAt: t.dueAt.toISOString(),
    attempts: t.attempts,
    maxAttempts: f.maxAttempts,
    lastError: t.lastError,
    deliveredAt: t.sentAt?.toISOString() ?? null,
    target: f.target,
    payload: (f.payload ?? null) as TimerJson['payload'],
    maxWaitUntil: t.burstStartedAt && t.maxWaitMs !== null ? new Date(t.burstStartedAt.getTime() + t.maxWaitMs).toISOString() : null,
    createdAt: t.createdAt.toISOString(),
    updatedAt: t.updatedAt.toISOString(),
  };
}
