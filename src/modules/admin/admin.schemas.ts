// Request and answer shapes of the operators' API, validated by zod at the
// edge and described by the OpenAPI document.
import { z } from 'zod';
import { clientIdSchema } from '../../core/auth/api-key-input.js';
import { plainText } from '../../core/http/plain-text.js';

export const deadQuerySchema = z.strictObject({
  cursor: z.string().max(400).optional(),
  limit: z.coerce.number().int().min(1).max(500).default(50),
});
export const redriveAllQuerySchema = z.strictObject({ max: z.coerce.number().int().min(1).max(10_000).default(1_000) });
export const latenessQuerySchema = z.strictObject({ minutes: z.coerce.number().int().min(1).max(15).default(5) });
export const batchesQuerySchema = z.strictObject({
  limit: z.coerce.number().int().min(1).max(100).default(20),
  client: clientIdSchema.optional().meta({ description: "only this client's batches" }),
});

/** As the engine checks it (producer/schedule-input.ts checkId); the engine stays the authority and checks again. */
export const jobIdSchema = plainText(1, 256).meta({ description: 'a job id, e.g. order:<uuid>:expire (URL-encoded)' });
export const JOB_ID_MESSAGE = 'job id must be 1..256 characters without control characters';

const instantOut = z.iso.datetime();
const count = z.int().min(0);

export const queueStatsJsonSchema = z.object({
  queue: z.string(),
  shard: z.union([z.int().min(0), z.literal('all')]),
  pending: count,
  dueNow: count,
  inFlight: count,
  dead: count,
  /** ms since epoch (Redis clock), null when nothing is pending. */
  nextDueAt: z.number().nullable(),
  oldestDueLagMs: z.number().min(0),
  /** Pending jobs set aside while their job type is paused (in pending, not in dueNow). */
  parked: count,
  /** '*' when the whole queue is paused, and the paused job types (POST /admin/queues/{name}/pause). */
  paused: z.array(z.string()),
});
export const queuesJsonSchema = z.object({
  queues: z.array(z.object({ total: queueStatsJsonSchema, shards: z.array(queueStatsJsonSchema) })),
});

export const jobJsonSchema = z.object({
  id: z.string(),
  state: z.enum(['pending', 'in_flight', 'dead']),
  type: z.string(),
  payload: z.unknown(),
  attempts: count,
  maxAttempts: z.int(),
  dueAt: instantOut.nullable(),
  leaseUntil: instantOut.nullable(),
  diedAt: instantOut.nullable(),
  lastError: z.string().nullable(),
  /** Pending, but set aside while its job type is paused (POST /admin/queues/{name}/pause). */
  parked: z.boolean(),
  /** 0..9: among due jobs, higher is claimed first (5 unless the job was scheduled with another). */
  priority: z.int(),
});
export type JobJson = z.input<typeof jobJsonSchema>;
export const deadPageJsonSchema = z.object({
  jobs: z.array(jobJsonSchema),
  /** Pass as ?cursor= for the next page; null on the last one. */
  next: z.string().nullable(),
});

export const latenessJsonSchema = z.object({
  from: instantOut,
  to: instantOut,
  /** Upper bounds of the buckets the quantiles are estimated from. */
  bucketsMs: z.array(z.number()),
  queues: z.array(
    z.object({
      queue: z.string(),
      /** Seconds in which jobs started, oldest first; `t` is the second's start (ms since epoch). */
      points: z.array(z.object({ t: z.int(), count: count, meanMs: z.number(), maxMs: z.number(), p50Ms: z.number(), p95Ms: z.number(), p99Ms: z.number() })),
    }),
  ),
});

export const recentBatchesJsonSchema = z.object({
  batches: z.array(
    z.object({
      id: z.uuid(),
      client: z.string(),
      area: z.string(),
      vehiclePlate: z.string(),
      reason: z.enum(['FULL', 'TIMEOUT', 'MANUAL']),
      parcels: count,
      createdAt: instantOut,
    }),
  ),
});

export const reportsQuerySchema = z.strictObject({
  limit: z.coerce.number().int().min(1).max(366).default(14),
  client: clientIdSchema.optional().meta({ description: "that client's figures instead of every client's" }),
});

const figure = z.number().int().nonnegative();
export const dailyReportsJsonSchema = z.object({
  reports: z.array(
    z.object({
      day: z.iso.date(),
      timezone: z.string(),
      generatedAt: instantOut,
      /** Every client's, or with ?client= that client's (zeros on a day it had none; null on a report made before reports counted per client). */
      figures: z
        .object({
          orders: z.object({ created: figure, paid: figure, paidCents: figure, cancelledTimeout: figure, cancelledCustomer: figure }),
          reminders: z.object({ written: figure, sent: figure, failed: figure }),
          notifications: z.object({ sent: figure, failed: figure }),
          parcels: z.object({ received: figure, batched: figure, maxWaitSeconds: z.number().nullable(), avgWaitSeconds: z.number().nullable() }),
          batches: z.object({ full: figure, timeout: figure }),
        })
        .nullable(),
    }),
  ),
});
