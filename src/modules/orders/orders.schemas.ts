// Request shapes of the orders API, validated by zod at the edge.
import { z } from 'zod';
import { plainText } from '../../core/http/plain-text.js';

export const orderItemSchema = z.strictObject({
  sku: plainText(1, 64),
  quantity: z.int().min(1).max(1_000),
  // Capped so 100 items x 1 000 units stays well inside a safe integer total.
  unitPriceCents: z.int().min(0).max(1_000_000_000),
});

export const createOrderSchema = z.strictObject({
  customerId: plainText(1, 64),
  items: z.array(orderItemSchema).min(1).max(100),
  currency: z
    .string()
    .regex(/^[A-Za-z]{3}$/, 'must be a 3-letter currency code')
    .transform((c) => c.toUpperCase())
    .default('CNY'),
  paymentTimeoutSeconds: z.int().min(1).max(604_800).optional(),
});
export type CreateOrderInput = z.infer<typeof createOrderSchema>;

export const payOrderSchema = z.strictObject({
  paymentRef: plainText(1, 128).optional(),
});

export const orderIdSchema = z.uuid();

// Answer shapes, for the OpenAPI document (the serialiser in orders.routes.ts is typed by them).
const instantOut = z.iso.datetime();
export const orderJsonSchema = z.object({
  id: z.uuid(),
  customerId: z.string(),
  status: z.enum(['UNPAID', 'PAID', 'CANCELLED']),
  totalCents: z.int(),
  currency: z.string().length(3),
  items: z.array(z.object({ sku: z.string(), quantity: z.int(), unitPriceCents: z.int() })),
  createdAt: instantOut,
  expiresAt: instantOut,
  paidAt: instantOut.nullable(),
  paymentRef: z.string().nullable(),
  cancelledAt: instantOut.nullable(),
  cancelReason: z.enum(['PAYMENT_TIMEOUT', 'CUSTOMER']).nullable(),
});
export type OrderJson = z.input<typeof orderJsonSchema>;
