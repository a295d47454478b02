// Request shapes of the parcels API. Area codes become part of Redis keys (a
// batcher group: the code, or "<client>/<code>", parcels.groups.ts), so they
// are held to a strict pattern here, before anything else sees them: no '/'
// (one group name per area), no '.', within the batcher's group pattern.
import { z } from 'zod';
import { plainText } from '../../core/http/plain-text.js';

export const areaCodeSchema = z.string().regex(/^[A-Za-z0-9_-]{1,32}$/, 'an area code is 1..32 of [A-Za-z0-9_-]');

/** An area's own batch size and maximum wait (the areas table's CHECK constraints hold the same ranges). */
export const AREA_BATCH_SIZE_MAX = 1_000;
export const AREA_MAX_WAIT_SECONDS_MAX = 86_400;

export const putAreaSchema = z.strictObject({
  vehiclePlate: plainText(1, 16).trim(),
  sorterContact: plainText(3, 254).trim().meta({
    description:
      'one address (name@domain) or one phone number (international, or national with PHONE_DEFAULT_REGION), stored as E.164; else 422 INVALID_CONTACT',
  }),
  batchSize: z
    .int()
    .min(1)
    .max(AREA_BATCH_SIZE_MAX)
    .nullable()
    .optional()
    .meta({ description: "the area's batch size; absent or null: PARCEL_BATCH_SIZE. Applies to the parcels already waiting too" }),
  maxWaitSeconds: z
    .int()
    .min(1)
    .max(AREA_MAX_WAIT_SECONDS_MAX)
    .nullable()
    .optional()
    .meta({ description: "the area's maximum wait; absent or null: PARCEL_MAX_WAIT_SECONDS. Applies to the parcels already waiting too" }),
});

export const moveParcelSchema = z.strictObject({ area: areaCodeSchema });

// Printable, no spaces at the ends: tracking numbers are printed on labels.
export const trackingNoSchema = z.string().regex(/^[\x21-\x7e]([\x20-\x7e]{0,62}[\x21-\x7e])?$/, 'a tracking number is 1..64 printable characters');

export const postParcelSchema = z.strictObject({
  trackingNo: trackingNoSchema,
  area: areaCodeSchema,
});

/** Most parcels in one POST /parcels/batch. */
export const INTAKE_BATCH_MAX = 1_000;
/** A batch intake: each parcel is checked on its own (a bad one is refused alone), the list as a whole here. */
export const postParcelBatchSchema = z.strictObject({
  parcels: z.array(z.unknown()).min(1).max(INTAKE_BATCH_MAX),
});

export const batchIdSchema = z.uuid();

export const listBatchesSchema = z.strictObject({
  area: areaCodeSchema,
  limit: z.coerce.number().int().min(1).max(500).default(100),
});

// Answer shapes, for the OpenAPI document (the serialisers in parcels.routes.ts are typed by them).
const instantOut = z.iso.datetime();
export const areaJsonSchema = z.object({
  code: z.string(),
  vehiclePlate: z.string(),
  sorterContact: z.string(),
  /** The area's own rule; null: the default. */
  batchSize: z.int().nullable(),
  maxWaitSeconds: z.int().nullable(),
});
export const areaStateJsonSchema = areaJsonSchema.extend({
  /** Parcels waiting for a batch (from PostgreSQL). */
  waiting: z.int(),
  firstArrivalAt: instantOut.nullable(),
});
export const parcelJsonSchema = z.object({
  trackingNo: z.string(),
  area: z.string(),
  status: z.enum(['WAITING', 'BATCHED', 'WITHDRAWN']),
  batchId: z.uuid().nullable(),
  createdAt: instantOut,
  batchedAt: instantOut.nullable(),
});
export type ParcelJson = z.input<typeof parcelJsonSchema>;
export const parcelBatchJsonSchema = z.object({
  /** One per parcel asked, in order. */
  results: z.array(z.union([parcelJsonSchema.extend({ created: z.boolean() }), z.object({ error: z.object({ code: z.string(), message: z.string() }) })])),
});
export const batchJsonSchema = z.object({
  id: z.uuid(),
  area: z.string(),
  vehiclePlate: z.string(),
  reason: z.enum(['FULL', 'TIMEOUT', 'MANUAL']),
  /** Tracking numbers, in arrival order. */
  parcels: z.array(z.string()),
  createdAt: instantOut,
});
export type BatchJson = z.input<typeof batchJsonSchema>;
