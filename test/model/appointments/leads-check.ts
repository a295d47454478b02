// The appointments model suite's rules for several-lead bookings once a run
// has settled, per slot and lead: at most one reminder; none written for a
// slot and lead not held, before its remind time or after it was left; one
// held long enough past its remind time has its reminder SENT and taken (or
// refused, or withdrawn after every call failed); one given up before its
// remind time has none the receiver took; SENT exactly when the receiver
// took it.
import { type Real, cutOffBy, excuse, repeatExplained } from '../runner.js';
import { type Row, outcomeUnknown, owedBy, slotOf } from './checks.js';
import { type MultiAppt, holdKey, leadOfRow } from './leads.steps.js';
import { EPS_MS, type Held, type Model } from './model.js';

/** The run has settled for these bookings: every lead held to the end past its remind time has its reminder ended. */
export function leadsSettled(m: Model, rows: readonly Row[], ended: (n: Row) => boolean): boolean {
  return m.multi.every((a) => {
    if (a.cancelled) return true;
    const held = a.leads.map((lead) => a.holds.get(holdKey(a.current, lead))?.at(-1)?.remindAt ?? Infinity).filter((t) => t !== Infinity);
    if (held.some((t) => t > Date.now())) return false;
    return a.leads.every((lead) => {
      const h = a.holds.get(holdKey(a.current, lead))?.at(-1);
      return (
        !h || h.remindAt === Infinity || rows.some((n) => n.appointmentId === a.id && slotOf(n) === a.current && leadOfRow(a, n.payload) === lead && ended(n))
      );
    });
  });
}

export type LeadCounts = { multi: number; leadHolds: number; leadOwed: number; leadSkipped: number };

export function checkLeads(m: Model, r: Real, rows: readonly Row[], add: (p: string) => void, refusedAt: (id: string) => number | undefined): LeadCounts {
  const counts: LeadCounts = { multi: m.multi.length, leadHolds: 0, leadOwed: 0, leadSkipped: 0 };
  const delivered = new Map<string, number>();
  for (const c of r.world.webhook.delivered) delivered.set(c.body.id, (delivered.get(c.body.id) ?? 0) + 1);
  const isOwed = (h: Held) => h.remindAt !== Infinity && owedBy(Math.max(h.from, h.remindAt), r.run.faultSpans) <= h.untilLow;
  for (const a of m.multi) checkOne(a);
  return counts;

  function checkOne(a: MultiAppt): void {
    const mine = rows.filter((n) => n.appointmentId === a.id);
    const leadOf = (n: Row) => leadOfRow(a, n.payload);
    for (const n of mine) {
      if (n.client !== a.client) add(`appointment ${a.id} (of ${a.client}): reminder ${n.id} is ${n.client}'s`);
      const held = a.holds.get(holdKey(slotOf(n), leadOf(n)));
      if (!held) {
        add(`appointment ${a.id}: reminder ${n.id} for a slot and lead it never held (${slotOf(n)}, ${leadOf(n)} s)`);
        continue;
      }
      const at = n.createdAt.getTime();
      if (!held.some((h) => at >= h.remindAt - EPS_MS && at >= h.from - EPS_MS && at <= h.untilHigh + EPS_MS))
        add(`appointment ${a.id}: reminder ${n.id} (${leadOf(n)} s) written outside a hold of its lead past its remind time`);
      const got = delivered.get(n.id) ?? 0;
      const unknown =
        got > 0 &&
        outcomeUnknown(
          n,
          r.world.webhook.delivered.filter((c) => c.body.id === n.id),
          r.run.faultSpans,
        );
      if (!unknown && (n.status === 'SENT') !== got > 0) add(`appointment ${a.id}: reminder ${n.id} is ${n.status}, the receiver took it ${got} times`);
      if (got > 1 && !repeatExplained(r, n)) add(`appointment ${a.id}: reminder ${n.id} taken ${got} times without a fault that could cut a send off`);
      const refusal = refusedAt(n.id);
      if (refusal !== undefined) {
        const next = r.world.webhook.calls.find((c) => c.body.id === n.id && c.at > refusal);
        const cause = next && cutOffBy(r, { at: refusal });
        if (next && cause) excuse(r, cause, `reminder ${n.id} called again after a refusal`);
        else if (next) add(`appointment ${a.id}: reminder ${n.id} called again after the receiver refused it`);
      }
    }
    for (const [key, held] of a.holds) {
      counts.leadHolds++;
      const [startsAt, lead] = [key.split('#')[0]!, Number(key.split('#')[1])];
      const forKey = mine.filter((n) => slotOf(n) === startsAt && leadOf(n) === lead);
      if (forKey.length > 1) add(`appointment ${a.id}: ${forKey.length} reminders for slot ${startsAt}, lead ${lead} s`);
      const n = forKey[0];
      if (held.every((h) => h.remindAt === Infinity)) counts.leadSkipped++;
      if (held.some(isOwed)) {
        counts.leadOwed++;
        const heldToEnd = !a.cancelled && a.current === startsAt && a.leads.includes(lead);
        const calls = n ? r.world.webhook.calls.filter((c) => c.body.id === n.id) : [];
        const triedWhileOwed = held.filter(isOwed).every((h) => calls.some((c) => c.at >= h.from && c.at <= h.untilHigh));
        const withdrawnAfterTries = !heldToEnd && n?.status === 'CANCELLED' && triedWhileOwed && (delivered.get(n.id) ?? 0) === 0;
        const refused = n !== undefined && refusedAt(n.id) !== undefined && (n.status === 'FAILED' || (!heldToEnd && n.status === 'CANCELLED'));
        if (!n || (n.status !== 'SENT' && !withdrawnAfterTries && !refused))
          add(`appointment ${a.id}: slot ${startsAt}, lead ${lead} s held past its remind time, reminder ${n ? `${n.id} ${n.status}` : 'never written'}`);
      } else if (held.every((h) => h.untilHigh < h.remindAt - EPS_MS)) {
        if (n && (delivered.get(n.id) ?? 0) > 0)
          add(`appointment ${a.id}: slot ${startsAt}, lead ${lead} s left before its remind time, yet reminder ${n.id} was delivered`);
      }
    }
  }
}
