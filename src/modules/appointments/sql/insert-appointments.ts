// Booked: appointments inserted in one statement (all or none), BOOKED,
// each with its client (one statement may carry several clients' bookings),
// remind_at = the planned remind time (the start less the lead, out of the
// quiet hours: quiet-hours.ts) or now when that has passed, by the database
// clock; with several leads, each lead's planned time (a skipped one null,
// one past made the statement's moment). Guard: the primary key and the idempotency key's unique
// index (a conflict fails the statement: the caller's idempotent create
// decides). Lock order: the new rows only. Returns them in input order.
import type { Db } from '../../../core/db.js';
import { type AppointmentRow, COLUMNS } from './appointment-row.js';

export type NewAppointment = {
  id: string;
  /** The client (tenant) that books it. */
  client: string;
  customerId: string;
  contact: string;
  channel: 'SMS' | 'EMAIL';
  startsAt: Date;
  remindBeforeSeconds: number;
  /** When its reminder is planned (plannedRemindAt; none: the start less the lead); a time past is made the statement's moment. */
  remindAt?: Date | undefined;
  /** Several leads, longest first, each with its planned time (null: skipped); none: one lead, remindBeforeSeconds. */
  leads?: readonly { lead: number; at: Date | null }[] | undefined;
  /** The IANA time zone its quiet hours are read in (none: the configured default). */
  timeZone?: string | null | undefined;
  idempotencyKey: string | null;
  requestHash: string | null;
};

export async function insertAppointments(db: Db, rows: readonly NewAppointment[]): Promise<AppointmentRow[]> {
  const col = <T>(f: (r: NewAppointment) => T) => rows.map(f);
  const inserted = await db.$queryRaw<AppointmentRow[]>`
    INSERT INTO appointments (id, client, customer_id, contact, channel, starts_at, remind_before_seconds, remind_at, time_zone,
                              created_at, updated_at, idempotency_key, request_hash, leads, lead_remind_at)
    SELECT t.id, t.client, t.customer_id, t.contact, t.channel, t.starts_at, t.lead,
           GREATEST(COALESCE(t.planned, t.starts_at - make_interval(secs => t.lead)), now()), t.time_zone, now(), now(), t.idem_key, t.req_hash,
           CASE WHEN t.plan IS NULL THEN NULL ELSE ARRAY(SELECT (p.x->>'lead')::int FROM jsonb_array_elements(t.plan) WITH ORDINALITY AS p(x, i) ORDER BY p.i) END,
           CASE WHEN t.plan IS NULL THEN NULL ELSE ARRAY(
             SELECT CASE WHEN p.x->>'at' IS NULL THEN NULL ELSE GREATEST((p.x->>'at')::timestamptz, now()) END
               FROM jsonb_array_elements(t.plan) WITH ORDINALITY AS p(x, i) ORDER BY p.i) END
      FROM unnest(${col((r) => r.id)}::uuid[], ${col((r) => r.client)}::text[], ${col((r) => r.customerId)}::text[], ${col((r) => r.contact)}::text[],
                  ${col((r) => r.channel)}::"Channel"[], ${col((r) => r.startsAt)}::timestamptz[],
                  ${col((r) => r.remindBeforeSeconds)}::int[], ${col((r) => r.remindAt ?? null)}::timestamptz[], ${col((r) => r.timeZone ?? null)}::text[],
                  ${col((r) => r.idempotencyKey)}::text[], ${col((r) => r.requestHash)}::text[], ${col((r) => (r.leads ? JSON.stringify(r.leads) : null))}::jsonb[])
           AS t(id, client, customer_id, contact, channel, starts_at, lead, planned, time_zone, idem_key, req_hash, plan)
    RETURNING ${COLUMNS}`;
  const byId = new Map(inserted.map((r) => [r.id, r]));
  return rows.map((r) => {
    const row = byId.get(r.id);
    if (!row) throw new Error(`appointment ${r.id} was not inserted`);
    return row;
  });
}
