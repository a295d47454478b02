// Request shapes of the appointments API, validated by zod at the edge.
import { z } from 'zod';
import { plainText } from '../../core/http/plain-text.js';
import { NOTIFICATION_STATUSES } from '../../core/delivery/index.js';
import { MAX_LEADS } from './lead-plan.js';
import { canonicalTimeZone } from './quiet-hours.js';

// An ISO-8601 instant with an explicit offset (Z or +hh:mm): a local time without
// one would mean different instants on different servers.
const instant = z.iso.datetime({ offset: true }).transform((s) => new Date(s));

export const channelSchema = z.enum(['sms', 'email']);
/** The longest reminder lead a booking may ask (30 days). */
export const MAX_LEAD_SECONDS = 2_592_000;
const oneLead = z.int().min(0).max(MAX_LEAD_SECONDS);
/** One lead (s), or a list of up to MAX_LEADS distinct ones: a reminder each. */
const lead = z
  .union([
    oneLead,
    z
      .array(oneLead)
      .min(1)
      .max(MAX_LEADS)
      .refine((l) => new Set(l).size === l.length, { message: 'leads must be distinct' }),
  ])
  .meta({ description: `seconds before startsAt: one lead (0..${MAX_LEAD_SECONDS}), or a list of 1..${MAX_LEADS} distinct ones, a reminder each` });
/** An IANA time zone Intl knows, kept as Intl names it (`europe/berlin` -> `Europe/Berlin`); offsets are not zones. */
const timeZone = z
  .string()
  .max(64)
  .transform((v, ctx) => {
    const zone = canonicalTimeZone(v);
    if (zone) return zone;
    ctx.addIssue({ code: 'custom', message: 'must be an IANA time zone, e.g. Europe/Berlin' });
    return z.NEVER;
  })
  .meta({ description: 'IANA time zone (Europe/Berlin) its reminder quiet hours are read in; default APPOINTMENT_DEFAULT_TIME_ZONE' });

export const bookAppointmentSchema = z.strictObject({
  customerId: plainText(1, 64),
  contact: plainText(3, 254).meta({
    description:
      'sms: one phone number, international (+44 7911 123456; national only with PHONE_DEFAULT_REGION), stored in E.164; email: one address, name@domain. Else 422 INVALID_CONTACT',
  }),
  channel: channelSchema,
  startsAt: instant,
  remindBeforeSeconds: lead.optional(),
  timeZone: timeZone.optional(),
});
export type BookAppointmentInput = z.infer<typeof bookAppointmentSchema>;

export const rescheduleAppointmentSchema = z
  .strictObject({ startsAt: instant.optional(), remindBeforeSeconds: lead.optional(), timeZone: timeZone.optional() })
  .refine((v) => v.startsAt !== undefined || v.remindBeforeSeconds !== undefined || v.timeZone !== undefined, {
    message: 'give startsAt, remindBeforeSeconds, timeZone or several',
  });
export type RescheduleAppointmentInput = z.infer<typeof rescheduleAppointmentSchema>;

export const appointmentIdSchema = z.uuid();

// Answer shapes, for the OpenAPI document (the serialisers in appointments.routes.ts are typed by them).
const instantOut = z.iso.datetime();
export const appointmentJsonSchema = z.object({
  id: z.uuid(),
  customerId: z.string(),
  contact: z.string(),
  channel: channelSchema,
  status: z.enum(['BOOKED', 'CANCELLED']),
  startsAt: instantOut,
  /** The lead as booked: one number for one lead, the list (longest first) for several. */
  remindBeforeSeconds: z.union([z.int(), z.array(z.int())]),
  /** The earliest planned reminder (one lead: its remind time); with every lead skipped, the time of the change. */
  remindAt: instantOut,
  /** Each lead's reminder and its planned time, longest lead first; null: skipped, its time had passed when it was set while another reminder was still to come. */
  leads: z.array(z.object({ leadSeconds: z.int(), remindAt: instantOut.nullable() })),
  timeZone: z.string(),
  createdAt: instantOut,
  updatedAt: instantOut,
  cancelledAt: instantOut.nullable(),
});
export type AppointmentJson = z.input<typeof appointmentJsonSchema>;

export const appointmentWithRemindersJsonSchema = appointmentJsonSchema.extend({
  reminders: z.array(
    z.object({
      id: z.uuid(),
      /** The slot the reminder was written for. */
      startsAt: z.string().nullable(),
      /** The lead it was written for (null: written before reminders named their lead). */
      leadSeconds: z.int().nullable(),
      status: z.enum(NOTIFICATION_STATUSES),
      attempts: z.int(),
      createdAt: instantOut,
      sentAt: instantOut.nullable(),
    }),
  ),
});
export type AppointmentWithRemindersJson = z.input<typeof appointmentWithRemindersJsonSchema>;
