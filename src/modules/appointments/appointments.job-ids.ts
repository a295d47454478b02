// The reminder jobs of an appointment: one per lead planned on its slot, its
// id and payload built and read here. The key lead's job keeps the id of
// one-lead bookings (`appointment:<id>:remind`); another lead's id ends in
// `:<lead>` and its payload names the lead.
import type { ScheduleInput } from '../../queue/index.js';
import { type AppointmentRow, slotLead } from './appointments.repository.js';

export const REMIND_JOB = 'appointment.remind';

const UUID = '[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}';
const REMIND_ID = new RegExp(`^appointment:(${UUID}):remind(?::(\\d+))?$`);

/** The job id of the reminder of lead `lead` (as the slot names it: null for the key lead) of appointment `id`. */
export const remindJobId = (id: string, lead: number | null = null): string => `appointment:${id}:remind${lead === null ? '' : `:${lead}`}`;
/** The appointment a reminder job's id names; null for any other id. */
export const appointmentIdOfRemindJob = (jobId: string): string | null => REMIND_ID.exec(jobId)?.[1] ?? null;

/**
 * A reminder job's payload: the start of the slot it reminds of (ms since
 * epoch) and, but for the key lead, its lead (s); the handler reads the
 * appointment from the job id. A short record fits a record group
 * (BENCHMARKS.md, "Engine at size").
 */
export const remindPayload = (a: Pick<AppointmentRow, 'startsAt'>, lead: number | null = null) =>
  lead === null ? { startsAt: a.startsAt.getTime() } : { startsAt: a.startsAt.getTime(), lead };

type Planned = Pick<AppointmentRow, 'id' | 'startsAt' | 'leads' | 'leadRemindAt' | 'keyLead'>;

/** The leads planned on the slot `a` holds, as its slot names them (null: the key lead), with their times. */
export const plannedLeads = (a: Planned): { lead: number | null; at: Date }[] =>
  a.leads.flatMap((lead, i) => {
    const at = a.leadRemindAt[i];
    return at ? [{ lead: slotLead(a, lead), at }] : [];
  });

/** The job of lead `lead` (as the slot names it) of the slot `a` holds, due at `at`. */
export const reminderJob = (a: Pick<AppointmentRow, 'id' | 'startsAt'>, lead: number | null, at: Date, mode: 'upsert' | 'nx' = 'upsert'): ScheduleInput => ({
  id: remindJobId(a.id, lead),
  type: REMIND_JOB,
  at,
  payload: remindPayload(a, lead),
  mode,
});

/** The jobs of every lead planned on the slot `a` holds. */
export const reminderJobs = (a: Planned, mode: 'upsert' | 'nx' = 'upsert'): ScheduleInput[] => plannedLeads(a).map((p) => reminderJob(a, p.lead, p.at, mode));
