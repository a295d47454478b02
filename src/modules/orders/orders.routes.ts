// HTTP edge of the orders domain, as a route table: each route declares its
// schemas and answers (for the router and the OpenAPI document alike), then
// calls one service function and sends. With the admin token, the table also
// holds the operators' extension of deadlines, behind that token's guard.
import { CREATED_HEADERS } from '../../core/http/idempotency-key.js';
import { HTTP_ERRORS, route, type PathParam, type RouteTable } from '../../core/http/route.js';
import type { OrderRow } from './orders.repository.js';
import { z } from 'zod';
import {
  createOrderSchema,
  extendDeadlinesSchema,
  moveDeadlineSchema,
  type OrderJson,
  orderIdSchema,
  orderJsonSchema,
  payOrderSchema,
} from './orders.schemas.js';
import type { OrdersService } from './orders.service.js';

const id = { schema: orderIdSchema, status: 400, code: 'INVALID_ORDER_ID', message: () => 'an order id is a UUID' } satisfies PathParam;
const NOT_FOUND = { status: 404, code: 'ORDER_NOT_FOUND' };
const order = (description: string) => ({ description, schema: orderJsonSchema });

const ADMIN_PREFIX = '/admin/orders';

/** `adminToken`: ADMIN_TOKEN; without it the operators' route is left out, as the whole admin API is. */
export function ordersRoutes(service: OrdersService, adminToken?: string): RouteTable {
  return {
    tag: 'orders',
    description: 'Checkout: an unpaid order is cancelled when its payment window closes.',
    errors: [HTTP_ERRORS.DATABASE_UNAVAILABLE],
    ...(adminToken && { bearer: { prefix: ADMIN_PREFIX, token: adminToken } }),
    routes: [
      ...customerRoutes(service),
      route({
        method: 'patch',
        path: '/orders/:id',
        auth: 'orders:write',
        summary: 'Move the payment deadline of an unpaid order inside its window',
        description:
          'Exactly one of expiresAt (the new deadline) and extendBySeconds (added to the current one). By the database clock: the ' +
          'order UNPAID and its deadline not passed, the new one after now and within ORDER_MAX_WINDOW_SECONDS of its creation. ' +
          'The expiry and the payment reminder move with it. A repeat under the same Idempotency-Key answers the order as it is.',
        params: { id },
        idempotencyKey: true,
        body: moveDeadlineSchema,
        responses: { 200: order('the order, with its new expiresAt') },
        errors: [
          NOT_FOUND,
          { status: 409, code: 'ORDER_NOT_MOVABLE' },
          { status: 409, code: 'ORDER_EXPIRED' },
          { status: 422, code: 'EXPIRES_AT_IN_PAST' },
          { status: 422, code: 'PAYMENT_WINDOW_TOO_LONG' },
          { status: 422, code: 'IDEMPOTENCY_KEY_REUSED' },
        ],
        handle: async ({ params, body, idempotencyKey, client }, res, req) => {
          const move = body.expiresAt ? { expiresAt: body.expiresAt } : { extendBySeconds: body.extendBySeconds ?? 0 };
          // The body as sent, for the Idempotency-Key's hash (the parsed one holds a Date).
          res.json(toJson(await service.move(client, params.id, move, idempotencyKey, req.body as unknown)));
        },
      }),
      ...(adminToken ? [extendRoute(service)] : []),
    ],
  };
}

function extendRoute(service: OrdersService) {
  return route({
    method: 'post',
    path: `${ADMIN_PREFIX}/extend`,
    auth: 'admin',
    summary: 'Give the payment window back to every unpaid order whose deadline is in a range (an incident)',
    description:
      'In pages of 1 000 orders, each one statement in its own transaction: every UNPAID order (of `client`, or of all) whose deadline is in [expiringFrom, expiringTo) gets it pushed by ' +
      'extendBySeconds (not bound by ORDER_MAX_WINDOW_SECONDS); one paid or cancelled meanwhile is left alone, and one past its ' +
      'deadline not yet cancelled is extended or cancelled, whichever statement comes first. Not idempotent: a repeat extends again.',
    body: extendDeadlinesSchema,
    responses: { 200: { description: 'how many orders were extended', schema: z.object({ extended: z.int() }) } },
    handle: async ({ body }, res) => {
      res.json({ extended: await service.extend(body.expiringFrom, body.expiringTo, body.extendBySeconds, body.client ?? null) });
    },
  });
}

function customerRoutes(service: OrdersService) {
  return [
    route({
      method: 'post',
      path: '/orders',
      auth: 'orders:write',
      summary: 'Create an order (UNPAID) and schedule its expiry',
      idempotencyKey: true,
      body: createOrderSchema,
      responses: {
        201: { ...order('the order, UNPAID'), headers: CREATED_HEADERS },
      },
      errors: [{ status: 422, code: 'IDEMPOTENCY_KEY_REUSED' }],
      handle: async ({ body, idempotencyKey, client }, res) => {
        const { order: o, replayed } = await service.create(client, body, idempotencyKey);
        if (replayed) res.set('Idempotent-Replayed', 'true');
        res.status(201).location(`/orders/${o.id}`).json(toJson(o));
      },
    }),
    route({
      method: 'get',
      path: '/orders/:id',
      auth: 'orders:read',
      summary: 'Read an order',
      params: { id },
      responses: { 200: order('the order') },
      errors: [NOT_FOUND],
      handle: async ({ params, client }, res) => {
        res.json(toJson(await service.get(client, params.id)));
      },
    }),
    route({
      method: 'post',
      path: '/orders/:id/pay',
      auth: 'orders:write',
      summary: 'Pay an order within its payment window',
      description: 'Paying a paid order again answers 200 with the same order.',
      params: { id },
      body: payOrderSchema,
      bodyOptional: true,
      responses: { 200: order('the order, PAID') },
      errors: [NOT_FOUND, { status: 409, code: 'ORDER_NOT_PAYABLE' }, { status: 409, code: 'ORDER_EXPIRED' }],
      handle: async ({ params, body, client }, res) => {
        res.json(toJson(await service.pay(client, params.id, body.paymentRef ?? null)));
      },
    }),
    route({
      method: 'post',
      path: '/orders/:id/cancel',
      auth: 'orders:write',
      summary: 'Cancel an order (by the customer)',
      params: { id },
      responses: { 200: order('the order, CANCELLED') },
      errors: [NOT_FOUND, { status: 409, code: 'ORDER_NOT_CANCELLABLE' }],
      handle: async ({ params, client }, res) => {
        res.json(toJson(await service.cancel(client, params.id)));
      },
    }),
  ];
}

function toJson(o: OrderRow): OrderJson {
  return {
    id: o.id,
    customerId: o.customerId,
    status: o.status,
    totalCents: o.totalCents,
    currency: o.currency,
    items: o.items,
    createdAt: o.createdAt.toISOString(),
    expiresAt: o.expiresAt.toISOString(),
    paidAt: o.paidAt?.toISOString() ?? null,
    paymentRef: o.paymentRef,
    cancelledAt: o.cancelledAt?.toISOString() ?? null,
    cancelReason: o.cancelReason,
    paymentReminderBeforeSeconds: o.paymentReminderBeforeSeconds,
    paymentRemindAt: o.paymentRemindAt?.toISOString() ?? null,
  };
}
