// Which reminders a booking's leads get, and when: each lead's time out of
// the quiet hours (quiet-hours.ts), a lead whose time has passed skipped while
// another reminder still comes, and which lead keeps the reminder key of
// one-lead bookings. Pure: the service plans, the statements hold the booking
// to what the plan was made from (its storage form and key lead included).
import { type QuietHours, plannedRemindAt } from './quiet-hours.js';

/** The most leads one booking may have. */
export const MAX_LEADS = 5;

/** A lead and its planned remind time (null: skipped). */
export type LeadPlan = { lead: number; at: Date | null };

/**
 * The booking a change is planned from: its slot, leads (longest first),
 * their planned times, its key lead, its storage form (`oneLead`: no list
 * stored) and its key lead as stored (AppointmentRow.pinnedKeyLead).
 */
export type PlannedFrom = {
  startsAt: Date;
  leads: readonly number[];
  leadRemindAt: readonly (Date | null)[];
  keyLead: number;
  oneLead: boolean;
  pinnedKeyLead: number | null;
};

/**
 * What a booking or change stores. `leads` undefined: the one-lead form
 * (one lead, its reminder under the key without a lead, as bookings always
 * had), reminded at `remindAt`, with `keyLead` the lead that key was written
 * for on this slot, carried (undefined: none written, or a new slot).
 * Otherwise each lead's plan, longest first, and the lead keeping the key
 * without a lead (undefined for a booking: the first).
 */
export type Plan = { remindBeforeSeconds: number; remindAt: Date; leads?: LeadPlan[]; keyLead?: number };

/** A lead or a list of them as a booking's leads: distinct, longest first (the earliest reminder first). */
export function leadsOf(input: number | readonly number[]): number[] {
  return [...new Set(typeof input === 'number' ? [input] : input)].sort((x, y) => y - x);
}

/**
 * The plan of `leads` for a slot at `startsAt` in `timeZone`, at `now` (ms),
 * from `was` (a change) or none (a booking).
 * - A lead whose time is ahead is planned at it.
 * - One whose time has passed is skipped (its reminder would come after a
 *   later one, or all at once with the others), unless it was planned on this
 *   same slot before (a change of the others, or of the zone: it stays due),
 *   or is the one lead replacing the one lead of a one-lead booking (its
 *   reminder is the slot's one reminder, as it always was), or the lead a
 *   one-lead booking's reminder was written for on this slot.
 * - A new slot (a booking, or a move) whose every lead has passed is reminded
 *   once, now, for its shortest lead: a late booking still gets its reminder.
 * The form comes from storage: a booking that ever held a list keeps it (a
 * lead of it has its reminder under `:<lead>`, which the one-lead form would
 * spell without a lead: a second reminder). Each (slot, lead) is written
 * under one key for the life of the booking on that slot: the key lead of a
 * list made from a one-lead booking on the same slot is the lead that key was
 * written for there (pinnedKeyLead), else its one lead.
 */
export function planLeads(startsAt: Date, leads: readonly number[], timeZone: string, quiet: QuietHours | null, now: number, was?: PlannedFrom): Plan {
  const start = startsAt.getTime();
  const sameSlot = was !== undefined && was.startsAt.getTime() === start;
  const oneLeadBefore = was === undefined || was.oneLead;
  // A list made from a one-lead booking on its slot: the key stays with the lead it was written for.
  const keyLead = was ? (was.oneLead ? ((sameSlot ? was.pinnedKeyLead : null) ?? was.leads[0]!) : was.keyLead) : undefined;
  const plannedBefore = (lead: number): boolean => {
    if (!sameSlot) return false;
    const i = was.leads.indexOf(lead);
    if (i >= 0) return was.leadRemindAt[i] != null;
    return oneLeadBefore && (leads.length === 1 || lead === keyLead) && was.leadRemindAt[0] != null;
  };
  const plans: LeadPlan[] = leads.map((lead) => {
    const at = plannedRemindAt(start, lead, timeZone, quiet, now);
    return { lead, at: at > now || plannedBefore(lead) ? new Date(at) : null };
  });
  if (!sameSlot && plans.every((p) => p.at === null)) {
    const last = plans[plans.length - 1]!;
    last.at = new Date(plannedRemindAt(start, last.lead, timeZone, quiet, now));
  }
  const times = plans.flatMap((p) => (p.at ? [p.at.getTime()] : []));
  const remindAt = new Date(times.length ? Math.min(...times) : now);
  const remindBeforeSeconds = leads[0]!;
  if (leads.length === 1 && oneLeadBefore) {
    // Same slot: the key's reminder stays the one it was written for (a later list keeps it with that lead).
    const pinned = sameSlot ? was.pinnedKeyLead : null;
    return { remindBeforeSeconds, remindAt, ...(pinned !== null ? { keyLead: pinned } : {}) };
  }
  return { remindBeforeSeconds, remindAt, leads: plans, ...(keyLead !== undefined ? { keyLead } : {}) };
}
