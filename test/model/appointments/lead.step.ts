// The appointments model suite's lead change: a PATCH with only
// remindBeforeSeconds, which moves the remind time and keeps the slot. The
// slot keeps its one reminder (its key is the start), so a reminder written
// under the old lead stays; one not written yet follows the new remind time,
// which is now when the new lead puts it in the past (the service's remind_at
// is GREATEST(start - lead, now())).
import type { Reply } from '../../chaos/drivers/http.js';
import type { Real } from '../runner.js';
import { OnAppt } from './book.steps.js';
import { type Appt, EPS_MS, type Model, close, fail, open } from './model.js';

/** The whole seconds of lead that put the remind time of `a`'s slot `offsetMs` from now (none below 0). */
export const leadFor = (a: Appt, offsetMs: number) => Math.max(0, Math.round((Date.parse(a.current) - Date.now() - offsetMs) / 1_000));

/**
 * Judges the answer to a lead change of `a` to `leadSeconds` and applies it:
 * the slot is the same, its remind time the start less the lead, or the
 * moment the change committed if that has passed. In the model the slot's
 * hold is split there: the reminder may have been written under the old
 * remind time, and must not be written before the new one otherwise.
 */
export function applyLead(m: Model, a: Appt, leadSeconds: number, res: Reply): void {
  if (res.status === 409 && res.body.code === 'APPOINTMENT_CANCELLED') {
    if (!a.cancelled) fail(`lead change of ${a.id}: refused as cancelled, never cancelled`, res);
    return;
  }
  if (res.status !== 200) fail(`lead change of ${a.id} to ${leadSeconds} s`, res);
  if (a.cancelled) fail(`lead change of ${a.id} after its cancel was answered`, res);
  if (res.body.startsAt !== a.current || res.body.remindBeforeSeconds !== leadSeconds) fail(`lead change of ${a.id} to ${leadSeconds} s at ${a.current}`, res);
  const asked = Date.parse(a.current) - leadSeconds * 1_000;
  const got = Date.parse(String(res.body.remindAt));
  const atCommit = got >= res.firstSentAt - EPS_MS && got <= res.receivedAt + EPS_MS;
  // The start less the lead while that is ahead of the commit; the commit's moment once it has passed.
  const right = got === asked ? asked >= res.firstSentAt - EPS_MS : got > asked && atCommit;
  if (!right) fail(`lead change of ${a.id} to ${leadSeconds} s: remind at ${new Date(asked).toISOString()} or at once`, res);
  m.leads.changed++;
  if (got > asked) m.leads.atOnce++;
  a.leadMs = leadSeconds * 1_000;
  close(a, res.firstSentAt, res.receivedAt);
  // A retried request's earlier attempt may have committed (and its reminder
  // been written) before the moment this answer gives: its earliest moment.
  open(a, a.current, res.firstSentAt, got > asked && res.attempts > 1 ? Math.max(asked, res.firstSentAt) : got);
}

/**
 * Changes only the lead of an appointment, most often one whose reminder is
 * still to come or just due (where the change decides when it is written),
 * to put its remind time `offsetMs` from now (before now: at once).
 */
export class ChangeLead extends OnAppt {
  constructor(
    pick: number,
    readonly offsetMs: number,
  ) {
    super(pick);
  }
  protected override list(m: Readonly<Model>): Appt[] {
    const near = m.appts.filter((a) => !a.cancelled && (a.slots.get(a.current)?.at(-1)?.remindAt ?? 0) > Date.now() - 500);
    return near.length ? near : m.appts;
  }
  async act(m: Model, r: Real) {
    const a = this.appt(m);
    const lead = leadFor(a, this.offsetMs);
    applyLead(m, a, lead, await r.world.httpAs(a.client).send('PATCH', `/appointments/${a.id}`, { remindBeforeSeconds: lead }));
  }
  toString() {
    return `ChangeLead(${this.pick}, remind in ${this.offsetMs} ms)`;
  }
}
