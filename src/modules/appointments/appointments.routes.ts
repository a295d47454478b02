// HTTP edge of the appointments domain, as a route table: each route declares
// its schemas and answers, then calls one service function and sends.
import { CREATED_HEADERS } from '../../core/http/idempotency-key.js';
import { HTTP_ERRORS, route, type PathParam, type RouteTable } from '../../core/http/route.js';
import type { AppointmentRow } from './appointments.repository.js';
import {
  type AppointmentJson,
  type AppointmentWithRemindersJson,
  appointmentIdSchema,
  appointmentJsonSchema,
  appointmentWithRemindersJsonSchema,
  bookAppointmentSchema,
  rescheduleAppointmentSchema,
} from './appointments.schemas.js';
import type { AppointmentsService } from './appointments.service.js';

const id = { schema: appointmentIdSchema, status: 400, code: 'INVALID_APPOINTMENT_ID', message: () => 'an appointment id is a UUID' } satisfies PathParam;
const NOT_FOUND = { status: 404, code: 'APPOINTMENT_NOT_FOUND' };
const IN_PAST = { status: 422, code: 'STARTS_AT_IN_PAST' };
const TOO_FAR = { status: 422, code: 'STARTS_AT_TOO_FAR' };
/** Not one phone number (sms) or one mailbox (email). */
const BAD_CONTACT = { status: 422, code: 'INVALID_CONTACT' };
const appointment = (description: string) => ({ description, schema: appointmentJsonSchema });

/** Past REMINDERS_PER_CONTACT_PER_HOUR for the contact (with Retry-After). */
const CONTACT_LIMITED = { status: 429, code: 'CONTACT_RATE_LIMITED' };

export function appointmentsRoutes(service: AppointmentsService): RouteTable {
  return {
    tag: 'appointments',
    description: 'Bookings: one reminder per slot and lead, moved with the slot, withdrawn on cancel.',
    errors: [HTTP_ERRORS.DATABASE_UNAVAILABLE],
    routes: [
      route({
        method: 'post',
        path: '/appointments',
        auth: 'appointments:write',
        summary: 'Book an appointment and schedule its reminders',
        idempotencyKey: true,
        body: bookAppointmentSchema,
        responses: {
          201: { ...appointment('the appointment, BOOKED'), headers: CREATED_HEADERS },
        },
        errors: [IN_PAST, TOO_FAR, BAD_CONTACT, { status: 422, code: 'IDEMPOTENCY_KEY_REUSED' }, CONTACT_LIMITED],
        handle: async ({ body, idempotencyKey, client }, res) => {
          const { appointment: a, replayed } = await service.book(client, body, idempotencyKey);
          if (replayed) res.set('Idempotent-Replayed', 'true');
          res.status(201).location(`/appointments/${a.id}`).json(toJson(a, service));
        },
      }),
      route({
        method: 'get',
        path: '/appointments/:id',
        auth: 'appointments:read',
        summary: 'Read an appointment with the reminders written for it',
        params: { id },
        responses: { 200: { description: 'the appointment and its reminders', schema: appointmentWithRemindersJsonSchema } },
        errors: [NOT_FOUND],
        handle: async ({ params, client }, res) => {
          const [a, reminders] = await Promise.all([service.get(client, params.id), service.reminders(client, params.id)]);
          const json: AppointmentWithRemindersJson = {
            ...toJson(a, service),
            reminders: reminders.map((n) => ({
              id: n.id,
              startsAt: (n.payload as { startsAt?: string }).startsAt ?? null,
              leadSeconds: (n.payload as { leadSeconds?: number }).leadSeconds ?? null,
              status: n.status,
              attempts: n.attempts,
              createdAt: n.createdAt.toISOString(),
              sentAt: n.sentAt?.toISOString() ?? null,
            })),
          };
          res.json(json);
        },
      }),
      route({
        method: 'patch',
        path: '/appointments/:id',
        auth: 'appointments:write',
        summary: 'Move an appointment (its reminders move with it)',
        description: 'Give startsAt, remindBeforeSeconds (one lead or a list), timeZone or several: the remind times are planned again from them.',
        params: { id },
        body: rescheduleAppointmentSchema,
        responses: { 200: appointment('the appointment') },
        errors: [NOT_FOUND, IN_PAST, TOO_FAR, { status: 409, code: 'APPOINTMENT_CANCELLED' }, { status: 409, code: 'APPOINTMENT_BUSY' }, CONTACT_LIMITED],
        handle: async ({ params, body, client }, res) => {
          res.json(toJson(await service.reschedule(client, params.id, body), service));
        },
      }),
      route({
        method: 'post',
        path: '/appointments/:id/cancel',
        auth: 'appointments:write',
        summary: 'Cancel an appointment (its reminders are withdrawn)',
        params: { id },
        responses: { 200: appointment('the appointment, CANCELLED') },
        errors: [NOT_FOUND],
        handle: async ({ params, client }, res) => {
          res.json(toJson(await service.cancel(client, params.id), service));
        },
      }),
    ],
  };
}

function toJson(a: AppointmentRow, service: Pick<AppointmentsService, 'timeZoneOf'>): AppointmentJson {
  return {
    id: a.id,
    customerId: a.customerId,
    contact: a.contact,
    channel: a.channel === 'SMS' ? 'sms' : 'email',
    status: a.status,
    startsAt: a.startsAt.toISOString(),
    // One lead answers as it was booked before there were several: a number.
    remindBeforeSeconds: a.leads.length === 1 ? a.remindBeforeSeconds : a.leads,
    remindAt: firstPlanned(a).toISOString(),
    leads: a.leads.map((lead, i) => ({ leadSeconds: lead, remindAt: a.leadRemindAt[i]?.toISOString() ?? null })),
    timeZone: service.timeZoneOf(a),
    createdAt: a.createdAt.toISOString(),
    updatedAt: a.updatedAt.toISOString(),
    cancelledAt: a.cancelledAt?.toISOString() ?? null,
  };
}

/** The earliest planned reminder of `a` (its remind time once reminded; with every lead skipped, that of the change). */
function firstPlanned(a: AppointmentRow): Date {
  const times = a.leadRemindAt.flatMap((t) => (t ? [t.getTime()] : []));
  return times.length ? new Date(Math.min(...times)) : a.remindAt;
}
