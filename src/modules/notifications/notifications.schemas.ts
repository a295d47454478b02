// Request and answer shapes of GET /notifications, validated by zod at the edge.
import { z } from 'zod';
import { NOTIFICATION_KINDS, NOTIFICATION_STATUSES } from '../../core/delivery/index.js';

/** Exactly one subject, a UUID. */
export const notificationFilterSchema = z.union([
  z.strictObject({ orderId: z.uuid() }),
  z.strictObject({ appointmentId: z.uuid() }),
  z.strictObject({ batchId: z.uuid() }),
]);

const instantOut = z.iso.datetime();
export const notificationJsonSchema = z.object({
  id: z.uuid(),
  kind: z.enum(NOTIFICATION_KINDS),
  status: z.enum(NOTIFICATION_STATUSES),
  orderId: z.uuid().nullable(),
  appointmentId: z.uuid().nullable(),
  batchId: z.uuid().nullable(),
  channel: z.string().nullable(),
  recipient: z.string().nullable(),
  payload: z.unknown(),
  attempts: z.int(),
  lastError: z.string().nullable().meta({
    description:
      "why the last attempt failed, as a category: unreachable, timeout, TLS failure, HTTP <status>, refused (HTTP <4xx>), redirect refused, withdrawn (...), given up (...), failed; the receiver's details stay in the service's logs",
  }),
  createdAt: instantOut,
  sentAt: instantOut.nullable(),
});
export type NotificationJson = z.input<typeof notificationJsonSchema>;
