// GET /notifications?orderId=|appointmentId=|batchId= : the outbox rows of one
// subject of the caller's client (another client's subject lists none).
import { z } from 'zod';
import { HTTP_ERRORS, route, type RouteTable } from '../../core/http/route.js';
import type { NotificationRow } from '../../core/delivery/index.js';
import { errorCategory } from './error-category.js';
import type { NotificationsRepository } from './notifications.repository.js';
import { type NotificationJson, notificationFilterSchema, notificationJsonSchema } from './notifications.schemas.js';

export function notificationsRoutes(repo: NotificationsRepository): RouteTable {
  return {
    tag: 'notifications',
    description: 'The outbox: notifications written with the state changes that caused them, and their delivery.',
    errors: [HTTP_ERRORS.DATABASE_UNAVAILABLE],
    routes: [
      route({
        method: 'get',
        path: '/notifications',
        auth: 'notifications:read',
        summary: 'The notifications of one order, appointment or parcel batch',
        description: 'Give exactly one of orderId, appointmentId or batchId.',
        query: notificationFilterSchema,
        queryError: { status: 400, code: 'INVALID_NOTIFICATION_FILTER', message: 'give exactly one of orderId, appointmentId or batchId, a UUID' },
        responses: { 200: { description: 'the notification rows, oldest first', schema: z.object({ notifications: z.array(notificationJsonSchema) }) } },
        handle: async ({ query, client }, res) => {
          res.json({ notifications: (await repo.list(client, query)).map(toJson) });
        },
      }),
    ],
  };
}

function toJson(n: NotificationRow): NotificationJson {
  return {
    id: n.id,
    kind: n.kind as NotificationJson['kind'],
    status: n.status,
    orderId: n.orderId,
    appointmentId: n.appointmentId,
    batchId: n.batchId,
    channel: n.channel,
    recipient: n.recipient,
    payload: n.payload,
    attempts: n.attempts,
    lastError: errorCategory(n.lastError),
    createdAt: n.createdAt.toISOString(),
    sentAt: n.sentAt?.toISOString() ?? null,
  };
}
