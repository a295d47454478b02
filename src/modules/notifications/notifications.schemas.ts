// Request and answer shapes of GET /notifications, validated by zod at the edge.
import { z } from 'zod';

/** Exactly one subject, a UUID. */
export const notificationFilterSchema = z.union([
  z.strictObject({ orderId: z.uuid() }),
  z.strictObject({ appointmentId: z.uuid() }),
  z.strictObject({ batchId: z.uuid() }),
]);

const instantOut = z.iso.datetime();
export const notificationJsonSchema = z.object({
  id: z.uuid(),
  kind: z.enum(['ORDER_CANCELLED', 'APPOINTMENT_REMINDER', 'BATCH_DISPATCHED']),
  status: z.enum(['PENDING', 'SENT', 'FAILED', 'CANCELLED']),
  orderId: z.uuid().nullable(),
  appointmentId: z.uuid().nullable(),
  batchId: z.uuid().nullable(),
  channel: z.string().nullable(),
  recipient: z.string().nullable(),
  payload: z.unknown(),
  attempts: z.int(),
  lastError: z.string().nullable(),
  createdAt: instantOut,
  sentAt: instantOut.nullable(),
});
export type NotificationJson = z.input<typeof notificationJsonSchema>;
