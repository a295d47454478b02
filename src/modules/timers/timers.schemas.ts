// Request and answer shapes of the timers API, validated by zod at the edge.
// Which targets a client may name is the operator's allowlist (targets/allowlist.ts),
// checked by the service after these shapes.
import { z } from 'zod';

const DAY_MS = 86_400_000;
/** How far ahead a timer may fire: a year and a day (a yearly renewal's reminder). */
export const MAX_DELAY_MS = 366 * DAY_MS;
/** Largest payload, as JSON text. */
export const MAX_PAYLOAD_BYTES = 64 * 1_024;
export const MAX_BATCH = 1_000;

export const timerKeySchema = z.string().regex(/^[A-Za-z0-9_.:-]{1,200}$/, 'must be 1..200 of [A-Za-z0-9_.:-]');

// A NATS subject to publish on: dot-separated tokens, no wildcards.
const natsSubject = z
  .string()
  .max(255)
  .regex(/^[A-Za-z0-9_:-]+(\.[A-Za-z0-9_:-]+)*$/, 'must be dot-separated tokens of [A-Za-z0-9_:-], no wildcards');

export const targetSchema = z.discriminatedUnion('type', [
  z.strictObject({ type: z.literal('webhook'), url: z.url({ protocol: /^https?$/, error: 'must be an http:// or https:// URL' }).max(2_000) }),
  z.strictObject({
    type: z.literal('amqp'),
    exchange: z.string().regex(/^[A-Za-z0-9_.:-]{1,255}$/, 'must be 1..255 of [A-Za-z0-9_.:-]'),
    routingKey: z
      .string()
      .max(255)
      .regex(/^[\x20-\x7e]*$/, 'must be printable ASCII'),
  }),
  z.strictObject({ type: z.literal('nats'), subject: natsSubject }),
]);

export const TIMER_MODES = ['replace', 'keep', 'debounce'] as const;
export type TimerMode = (typeof TIMER_MODES)[number];

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Whether every string of `v` (keys too) is one PostgreSQL's jsonb can hold: well-formed Unicode, no NUL. */
function storable(v: unknown): boolean {
  if (typeof v === 'string') return !LONE_SURROGATE.test(v) && !v.includes('\u0000');
  if (Array.isArray(v)) return v.every(storable);
  if (v !== null && typeof v === 'object') return Object.entries(v).every(([k, x]) => storable(k) && storable(x));
  return true;
}

// Any JSON (the body was parsed as JSON already): a plain unknown, as a recursive JSON schema does not fit the OpenAPI document.
const payloadSchema = z
  .unknown()
  .meta({ description: 'any JSON value, at most 64 KiB as JSON text' })
  .refine((p) => Buffer.byteLength(JSON.stringify(p)) <= MAX_PAYLOAD_BYTES, `must be at most ${MAX_PAYLOAD_BYTES} bytes as JSON`)
  .refine(storable, 'strings must be well-formed Unicode without NUL (\\u0000)');

export const putTimerSchema = z
  .strictObject({
    fireAt: z.iso.datetime({ offset: true }).optional(),
    delayMs: z.int().min(0).max(MAX_DELAY_MS).optional(),
    target: targetSchema,
    payload: payloadSchema.optional(),
    mode: z.enum(TIMER_MODES).default('replace'),
    maxWaitMs: z.int().min(1).max(MAX_DELAY_MS).optional(),
    maxAttempts: z.int().min(1).max(100).optional(),
  })
  .superRefine((b, ctx) => {
    if ((b.fireAt === undefined) === (b.delayMs === undefined)) {
      ctx.addIssue({ code: 'custom', path: ['fireAt'], message: 'give either fireAt or delayMs' });
    }
    if (b.mode === 'debounce' && b.delayMs === undefined) {
      ctx.addIssue({ code: 'custom', path: ['delayMs'], message: 'debounce pushes the fire time by delayMs: give delayMs' });
    }
    if (b.maxWaitMs !== undefined && b.mode !== 'debounce') {
      ctx.addIssue({ code: 'custom', path: ['maxWaitMs'], message: 'maxWaitMs is for mode debounce' });
    }
    if (b.fireAt !== undefined && Math.abs(Date.parse(b.fireAt) - Date.now()) > MAX_DELAY_MS) {
      ctx.addIssue({ code: 'custom', path: ['fireAt'], message: 'must be within a year and a day of now' });
    }
  });
export type PutTimerInput = z.infer<typeof putTimerSchema>;

// Each item is checked on its own (its key too), so a bad one is refused alone.
export const putTimersBatchSchema = z.strictObject({
  timers: z
    .array(z.looseObject({ key: z.string().max(200) }).meta({ description: '{key, ...the PUT /timers/{key} body}' }))
    .min(1)
    .max(MAX_BATCH)
    .refine((ts) => new Set(ts.map((t) => t.key)).size === ts.length, 'each key at most once in a batch'),
});

export const TIMER_STATES = ['PENDING', 'DELIVERING', 'DELIVERED', 'FAILED', 'CANCELLED'] as const;
export type TimerState = (typeof TIMER_STATES)[number];

export const listTimersQuerySchema = z.strictObject({
  state: z.enum(TIMER_STATES).optional(),
  prefix: z
    .string()
    .regex(/^[A-Za-z0-9_.:-]{0,200}$/)
    .optional(),
  cursor: timerKeySchema.optional(),
  limit: z.coerce.number().int().min(1).max(1_000).default(100),
});

// Answer shapes, for the OpenAPI document (the serialiser is typed by them).
const instantOut = z.iso.datetime();
export const timerJsonSchema = z.object({
  key: z.string(),
  state: z.enum(TIMER_STATES),
  fireAt: instantOut,
  attempts: z.int(),
  maxAttempts: z.int(),
  lastError: z.string().nullable(),
  deliveredAt: instantOut.nullable(),
  target: targetSchema,
  payload: z.unknown().meta({ description: 'the payload as given (null when none)' }),
  maxWaitUntil: instantOut.nullable().meta({ description: 'debounce: the latest the burst may push the fire time to' }),
  createdAt: instantOut,
  updatedAt: instantOut,
});
export type TimerJson = z.input<typeof timerJsonSchema>;

export const timersPageJsonSchema = z.object({ timers: z.array(timerJsonSchema), nextCursor: z.string().nullable() });

export const batchResultJsonSchema = z.object({
  results: z.array(
    z.object({
      key: z.string(),
      status: z.int().meta({ description: 'what PUT /timers/{key} would have answered for this item: 201, 200, or a 4xx' }),
      timer: timerJsonSchema.optional(),
      error: z.object({ code: z.string(), detail: z.string() }).optional(),
    }),
  ),
});
