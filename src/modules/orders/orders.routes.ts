// HTTP edge of the orders domain, as a route table: each route declares its
// schemas and answers (for the router and the OpenAPI document alike), then
// calls one service function and sends.
import { CREATED_HEADERS } from '../../core/http/idempotency-key.js';
import { HTTP_ERRORS, route, type PathParam, type RouteTable } from '../../core/http/route.js';
import type { OrderRow } from './orders.repository.js';
import { createOrderSchema, type OrderJson, orderIdSchema, orderJsonSchema, payOrderSchema } from './orders.schemas.js';
import type { OrdersService } from './orders.service.js';

const id = { schema: orderIdSchema, status: 400, code: 'INVALID_ORDER_ID', message: () => 'an order id is a UUID' } satisfies PathParam;
const NOT_FOUND = { status: 404, code: 'ORDER_NOT_FOUND' };
const order = (description: string) => ({ description, schema: orderJsonSchema });

export function ordersRoutes(service: OrdersService): RouteTable {
  return {
    tag: 'orders',
    description: 'Checkout: an unpaid order is cancelled when its payment window closes.',
    errors: [HTTP_ERRORS.DATABASE_UNAVAILABLE],
    routes: [
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
    ],
  };
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
  };
}
