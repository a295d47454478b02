// Request shapes of the orders API, validated by zod at the edge.
import { z } from 'zod';
import { clientIdSchema } from '../../core/auth/api-key-input.js';
import { plainText } from '../../core/http/plain-text.js';
import { MAX_REMINDER_LEAD_SECONDS } from './sql/order-row.js';

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
  // Its payment reminder's lead: null or absent, PAYMENT_REMINDER_BEFORE_SECONDS; 0, none.
  paymentReminderBeforeSeconds: z.int().min(0).max(MAX_REMINDER_LEAD_SECONDS).nullable().optional(),
});
export type CreateOrderInput = z.infer<typeof createOrderSchema>;

export const payOrderSchema = z.strictObject({
  paymentRef: plainText(1, 128).optional(),
});

export const orderIdSchema = z.uuid();

// An ISO-8601 instant with an explicit offset (Z or +hh:mm): a local time without
// one would mean different instants on different servers.
const instant = z.iso
  .datetime({ offset: true })
  // Year 0000 (read by JS, refused by PostgreSQL) and other far years are input errors, not deadlines.
  .refine((s) => {
    const y = new Date(s).getUTCFullYear();
    return y >= 1970 && y <= 9999;
  }, 'must be an instant between 1970 and 9999')
  .transform((s) => new Date(s));
const exactlyOne = (a: unknown, b: unknown) => (a === undefined) !== (b === undefined);

/** PATCH /orders/:id: a new deadline, or the current one plus seconds; exactly one. */
export const moveDeadlineSchema = z
  .strictObject({ expiresAt: instant.optional(), extendBySeconds: z.int().min(1).max(31_536_000).optional() })
  .refine((v) => exactlyOne(v.expiresAt, v.extendBySeconds), { message: 'give exactly one of expiresAt and extendBySeconds' });

/** POST /admin/orders/extend: the deadlines in [expiringFrom, expiringTo) pushed by extendBySeconds, of one client or all. */
export const extendDeadlinesSchema = z
  .strictObject({
    expiringFrom: instant,
    expiringTo: instant,
    extendBySeconds: z.int().min(1).max(31_536_000),
    client: clientIdSchema.optional(),
  })
  // Run even when a field failed (then left untransformed): judged only on two instants.
  .refine((v) => !(v.expiringFrom instanceof Date && v.expiringTo instanceof Date) || v.expiringFrom < v.expiringTo, {
    message: 'expiringFrom must be before expiringTo',
  });

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
  paymentReminderBeforeSeconds: z.int().nullable(),
  paymentRemindAt: instantOut.nullable(),
});
export type OrderJson = z.input<typeof orderJsonSchema>;
