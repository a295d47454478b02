// HTTP edge of parcel batching (areas, parcel intake, batches), as a route
// table: each route declares its schemas and answers, then calls the service
// with the caller's client (another client's areas, parcels and batches are
// answered as unknown ones).
import { z } from 'zod';
import { HTTP_ERRORS, route, type PathParam, type RouteTable } from '../../core/http/route.js';
import type { AreaRow, ParcelRow } from './parcels.repository.js';
import {
  type BatchJson,
  type ParcelJson,
  areaCodeSchema,
  areaJsonSchema,
  areaStateJsonSchema,
  batchIdSchema,
  batchJsonSchema,
  listBatchesSchema,
  moveParcelSchema,
  parcelBatchJsonSchema,
  parcelJsonSchema,
  postParcelBatchSchema,
  postParcelSchema,
  putAreaSchema,
  trackingNoSchema,
} from './parcels.schemas.js';
import type { ParcelsService } from './parcels.service.js';

const code = { schema: areaCodeSchema, status: 400, code: 'INVALID_AREA_CODE', message: () => 'an area code is 1..32 of [A-Za-z0-9_-]' } satisfies PathParam;
const trackingNo = {
  schema: trackingNoSchema,
  status: 400,
  code: 'INVALID_TRACKING_NO',
  message: () => 'a tracking number is 1..64 printable characters',
} satisfies PathParam;
/** Why a parcel of a batch intake was refused before anything was looked up. */
function checkParcel(item: unknown): { parcel: { trackingNo: string; area: string } } | { error: { code: string; message: string } } {
  const r = postParcelSchema.safeParse(item);
  if (r.success) return { parcel: r.data };
  const field = r.error.issues[0]?.path[0];
  if (field === 'trackingNo') return { error: { code: 'INVALID_TRACKING_NO', message: 'a tracking number is 1..64 printable characters' } };
  if (field === 'area') return { error: { code: 'INVALID_AREA_CODE', message: 'an area code is 1..32 of [A-Za-z0-9_-]' } };
  return { error: { code: 'INVALID_PARCEL', message: 'a parcel is {trackingNo, area} and nothing else' } };
}

const batchId = { schema: batchIdSchema, status: 400, code: 'INVALID_BATCH_ID', message: () => 'a batch id is a UUID' } satisfies PathParam;

export function parcelsRoutes(service: ParcelsService): RouteTable {
  return {
    tag: 'parcels',
    description: 'Parcel batching: per delivery area, parcels are batched at a size or after a maximum wait.',
    errors: [HTTP_ERRORS.DATABASE_UNAVAILABLE],
    routes: [
      route({
        method: 'put',
        path: '/areas/:code',
        auth: 'areas:write',
        summary: 'Create or update a delivery area',
        params: { code },
        description:
          'Replaces the whole area: batchSize and maxWaitSeconds absent or null are the defaults. A rule changed while parcels wait ' +
          'applies to them: a smaller size batches a group it makes full at once (FULL), a shorter wait a group whose first parcel has now waited it (TIMEOUT).',
        body: putAreaSchema,
        responses: { 200: { description: 'the area', schema: areaJsonSchema } },
        errors: [{ status: 422, code: 'INVALID_CONTACT' }],
        handle: async ({ params, body, client }, res) => {
          res.json(areaJson(await service.putArea(client, params.code, body)));
        },
      }),
      route({
        method: 'post',
        path: '/areas/:code/flush',
        auth: 'areas:write',
        summary: 'Batch what waits in an area now',
        description:
          'A MANUAL batch of the oldest waiting parcels of the area, up to its batch size (the rest keep waiting), answered as GET /batches/:id. ' +
          'A repeat under the same Idempotency-Key answers the batch the first one made; without one, a second flush answers 409 NOTHING_WAITING.',
        params: { code },
        idempotencyKey: true,
        responses: { 200: { description: 'the batch', schema: batchJsonSchema } },
        errors: [
          { status: 404, code: 'AREA_NOT_FOUND' },
          { status: 409, code: 'NOTHING_WAITING' },
          { status: 422, code: 'IDEMPOTENCY_KEY_REUSED' },
        ],
        handle: async ({ params, client, idempotencyKey }, res) => {
          res.json(batchJson(await service.flush(client, params.code, idempotencyKey)));
        },
      }),
      route({
        method: 'get',
        path: '/areas/:code',
        auth: 'parcels:read',
        summary: 'Read an area with its waiting parcels',
        params: { code },
        responses: { 200: { description: 'the area and what waits in it', schema: areaStateJsonSchema } },
        errors: [{ status: 404, code: 'AREA_NOT_FOUND' }],
        handle: async ({ params, client }, res) => {
          const { area, waiting } = await service.getArea(client, params.code);
          res.json({
            ...areaJson(area),
            waiting: waiting.count,
            firstArrivalAt: waiting.firstArrivalAt?.toISOString() ?? null,
          });
        },
      }),
      route({
        method: 'post',
        path: '/parcels',
        auth: 'parcels:write',
        summary: 'Take in a parcel for its area',
        body: postParcelSchema,
        responses: {
          202: { description: 'a new parcel, WAITING (or BATCHED when it completed a batch)', schema: parcelJsonSchema },
          200: { description: 'the same tracking number again, same area: the parcel as it is', schema: parcelJsonSchema },
        },
        errors: [
          { status: 409, code: 'TRACKING_NO_CONFLICT' },
          { status: 422, code: 'UNKNOWN_AREA' },
        ],
        handle: async ({ body, client }, res) => {
          const { parcel, created } = await service.intake(client, body.trackingNo, body.area);
          res.status(created ? 202 : 200).json(parcelJson(parcel));
        },
      }),
      route({
        method: 'post',
        path: '/parcels/batch',
        auth: 'parcels:write',
        summary: 'Take in up to 1 000 parcels at once',
        description:
          'Each parcel as POST /parcels takes one, in one database statement for all of them. The answer holds a result per parcel, in order: the parcel (created: false for a repeat) or its error; a refused parcel never fails the others.',
        body: postParcelBatchSchema,
        bodyLimit: '256kb',
        responses: { 200: { description: 'a result per parcel, in order', schema: parcelBatchJsonSchema } },
        handle: async ({ body, client }, res) => {
          const checked = body.parcels.map(checkParcel);
          const valid = checked.flatMap((c) => ('parcel' in c ? [c.parcel] : []));
          const outcomes = await service.intakeMany(
            client,
            valid.map((p) => ({ trackingNo: p.trackingNo, areaCode: p.area })),
          );
          let next = 0;
          const results = checked.map((c) => {
            if ('error' in c) return { error: c.error };
            const o = outcomes[next++];
            if (!o) throw new Error('batch intake answered fewer outcomes than parcels');
            return o.ok ? { ...parcelJson(o.parcel), created: o.created } : { error: { code: o.code, message: o.message } };
          });
          res.json({ results });
        },
      }),
      route({
        method: 'get',
        path: '/parcels/:trackingNo',
        auth: 'parcels:read',
        summary: 'Read a parcel',
        params: { trackingNo },
        responses: { 200: { description: 'the parcel', schema: parcelJsonSchema } },
        errors: [{ status: 404, code: 'PARCEL_NOT_FOUND' }],
        handle: async ({ params, client }, res) => {
          res.json(parcelJson(await service.getParcel(client, params.trackingNo)));
        },
      }),
      route({
        method: 'post',
        path: '/parcels/:trackingNo/withdraw',
        auth: 'parcels:write',
        summary: 'Withdraw a waiting parcel from its area',
        description: 'The parcel ends in no batch. Again: the same answer.',
        params: { trackingNo },
        responses: { 200: { description: 'the parcel, WITHDRAWN', schema: parcelJsonSchema } },
        errors: [
          { status: 404, code: 'PARCEL_NOT_FOUND' },
          { status: 409, code: 'ALREADY_BATCHED' },
        ],
        handle: async ({ params, client }, res) => {
          res.json(parcelJson(await service.withdraw(client, params.trackingNo)));
        },
      }),
      route({
        method: 'post',
        path: '/parcels/:trackingNo/move',
        auth: 'parcels:write',
        summary: 'Move a waiting parcel to another area',
        description:
          'Its arrival is kept: it waits in the new area, by the rule of that area, from when it was taken in (a group it fills is batched at once, FULL).',
        params: { trackingNo },
        body: moveParcelSchema,
        responses: { 200: { description: 'the parcel (BATCHED if it completed a batch of its new area)', schema: parcelJsonSchema } },
        errors: [
          { status: 404, code: 'PARCEL_NOT_FOUND' },
          { status: 404, code: 'AREA_NOT_FOUND' },
          { status: 409, code: 'ALREADY_BATCHED' },
          { status: 409, code: 'PARCEL_WITHDRAWN' },
          { status: 409, code: 'PARCEL_CHANGED' },
        ],
        handle: async ({ params, body, client }, res) => {
          res.json(parcelJson(await service.move(client, params.trackingNo, body.area)));
        },
      }),
      route({
        method: 'get',
        path: '/batches/:id',
        auth: 'parcels:read',
        summary: 'Read a batch',
        params: { id: batchId },
        responses: { 200: { description: 'the batch', schema: batchJsonSchema } },
        errors: [{ status: 404, code: 'BATCH_NOT_FOUND' }],
        handle: async ({ params, client }, res) => {
          res.json(batchJson(await service.getBatch(client, params.id)));
        },
      }),
      route({
        method: 'get',
        path: '/batches',
        auth: 'parcels:read',
        summary: "An area's latest batches, newest first",
        query: listBatchesSchema,
        responses: { 200: { description: 'the batches', schema: z.object({ batches: z.array(batchJsonSchema) }) } },
        handle: async ({ query, client }, res) => {
          res.json({ batches: (await service.listBatches(client, query.area, query.limit)).map(batchJson) });
        },
      }),
    ],
  };
}

function areaJson(a: AreaRow) {
  return { code: a.code, vehiclePlate: a.vehiclePlate, sorterContact: a.sorterContact, batchSize: a.batchSize, maxWaitSeconds: a.maxWaitSeconds };
}

function parcelJson(p: ParcelRow): ParcelJson {
  return {
    trackingNo: p.trackingNo,
    area: p.areaCode,
    status: p.status,
    batchId: p.batchId,
    createdAt: p.createdAt.toISOString(),
    batchedAt: p.batchedAt?.toISOString() ?? null,
  };
}

type BatchWithParcels = {
  id: string;
  areaCode: string;
  vehiclePlate: string;
  reason: 'FULL' | 'TIMEOUT' | 'MANUAL';
  createdAt: Date;
  parcels: { trackingNo: string }[];
};

function batchJson(b: BatchWithParcels): BatchJson {
  return {
    id: b.id,
    area: b.areaCode,
    vehiclePlate: b.vehiclePlate,
    reason: b.reason,
    parcels: b.parcels.map((p) => p.trackingNo),
    createdAt: b.createdAt.toISOString(),
  };
}
