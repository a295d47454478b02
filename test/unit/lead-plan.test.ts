// The plan of a booking's leads (src/modules/appointments/lead-plan.ts): each
// lead at its time, a passed one skipped while another is ahead, the catch-up
// of a new slot whose every lead has passed, the leads planned before on the
// same slot kept, and the one-lead form of bookings that only had one.
import { describe, expect, it } from 'vitest';
import { leadsOf, planLeads } from '../../src/modules/appointments/lead-plan.js';
import { parseQuietHours } from '../../src/modules/appointments/quiet-hours.js';

const NOW = Date.parse('2027-06-01T12:00:00.000Z');
const H = 3_600;
const at = (ms: number) => new Date(ms);
/** Storage forms of the booking a change is planned from. */
const ONE = { oneLead: true, pinnedKeyLead: null };
const LIST = { oneLead: false, pinnedKeyLead: null };

describe('leadsOf', () => {
  it('makes one lead a list and a list distinct, longest first', () => {
    expect(leadsOf(600)).toEqual([600]);
    expect(leadsOf([600, 86_400, 3_600])).toEqual([86_400, 3_600, 600]);
  });
});

describe('planLeads', () => {
  const start = at(NOW + 2 * H * 1_000);
  it('plans each lead ahead at the start less the lead, the first lead first', () => {
    const p = planLeads(start, [H, 600], 'UTC', null, NOW);
    expect(p.leads).toEqual([
      { lead: H, at: at(start.getTime() - H * 1_000) },
      { lead: 600, at: at(start.getTime() - 600_000) },
    ]);
    expect(p.remindAt).toEqual(at(start.getTime() - H * 1_000));
    expect(p.remindBeforeSeconds).toBe(H);
    expect(p.keyLead).toBeUndefined();
  });

  it('skips a lead whose time has passed while another is ahead', () => {
    const p = planLeads(start, [86_400, 600], 'UTC', null, NOW);
    expect(p.leads!.map((l) => l.at)).toEqual([null, at(start.getTime() - 600_000)]);
  });

  it('reminds a new slot whose every lead has passed once, for its shortest lead', () => {
    const p = planLeads(start, [86_400, 3 * H], 'UTC', null, NOW);
    expect(p.leads!.map((l) => l.at)).toEqual([null, at(start.getTime() - 3 * H * 1_000)]);
  });

  it('keeps a lead planned before on the same slot, skips one added whose time has passed', () => {
    const was = { ...LIST, startsAt: start, leads: [3 * H, 600], leadRemindAt: [at(NOW - H * 1_000), at(start.getTime() - 600_000)], keyLead: 3 * H };
    const p = planLeads(start, [86_400, 3 * H, 600], 'UTC', null, NOW, was);
    expect(p.leads!.map((l) => l.at)).toEqual([null, at(start.getTime() - 3 * H * 1_000), at(start.getTime() - 600_000)]);
    expect(p.keyLead).toBe(3 * H);
    // A move: a new slot, nothing carried.
    const moved = planLeads(at(start.getTime() + 60_000), [3 * H, 600], 'UTC', null, NOW, was);
    expect(moved.leads!.map((l) => l.at === null)).toEqual([true, false]);
  });

  it('keeps the one-lead form for one lead replacing the one lead of a one-lead booking, reminded at once when passed', () => {
    const was = { ...ONE, startsAt: start, leads: [600], leadRemindAt: [at(start.getTime() - 600_000)], keyLead: 600 };
    const p = planLeads(start, [86_400], 'UTC', null, NOW, was);
    expect(p.leads).toBeUndefined();
    expect(p.keyLead).toBeUndefined();
    expect(p.remindAt).toEqual(at(start.getTime() - 86_400_000));
    // From several leads down to one: the list form, keyed as before.
    const many = { ...was, ...LIST, leads: [H, 600], leadRemindAt: [at(start.getTime() - H * 1_000), null], keyLead: H };
    expect(planLeads(start, [600], 'UTC', null, NOW, many)).toMatchObject({ leads: [{ lead: 600, at: at(start.getTime() - 600_000) }], keyLead: H });
  });

  it('keeps the list form for a booking stored with a list of its key lead alone, and its skipped lead skipped', () => {
    // Once [60, 5], cut to [60] (60 skipped): stored as a list, not the one-lead form.
    const soon = at(NOW + 30_000);
    const was = { ...LIST, startsAt: soon, leads: [60], leadRemindAt: [null], keyLead: 60 };
    const p = planLeads(soon, [5], 'UTC', null, NOW, was);
    expect(p).toMatchObject({ leads: [{ lead: 5, at: at(soon.getTime() - 5_000) }], keyLead: 60 });
    // Its own skipped lead alone again: still skipped, not reminded at once.
    expect(planLeads(soon, [60], 'UTC', null, NOW, was).leads).toEqual([{ lead: 60, at: null }]);
  });

  it('carries the lead the key of a one-lead booking was written for on its slot, and keeps that key with it in a list', () => {
    // Key written for 3 h on this slot (pinned), then the one lead became 600 s.
    const was = { ...ONE, startsAt: start, leads: [600], leadRemindAt: [at(start.getTime() - 600_000)], keyLead: 600, pinnedKeyLead: 3 * H };
    expect(planLeads(start, [300], 'UTC', null, NOW, was)).toMatchObject({ keyLead: 3 * H });
    expect(planLeads(start, [300], 'UTC', null, NOW, was).leads).toBeUndefined();
    // A list: 3 h keeps the key (its time passed, its reminder is written: held), 600 s its own.
    const p = planLeads(start, [3 * H, 600], 'UTC', null, NOW, was);
    expect(p.keyLead).toBe(3 * H);
    expect(p.leads!.map((l) => l.at)).toEqual([at(start.getTime() - 3 * H * 1_000), at(start.getTime() - 600_000)]);
    // Nothing written yet: the one lead keeps the key.
    expect(planLeads(start, [3 * H, 600], 'UTC', null, NOW, { ...was, pinnedKeyLead: null }).keyLead).toBe(600);
    // A move: a new slot, nothing written there: the pin is not carried.
    const moved = at(start.getTime() + 60_000);
    expect(planLeads(moved, [300], 'UTC', null, NOW, was).keyLead).toBeUndefined();
    expect(planLeads(moved, [3 * H, 600], 'UTC', null, NOW, was).keyLead).toBe(600);
  });

  it('moves each lead out of the quiet hours on its own', () => {
    const quiet = parseQuietHours('22:00-08:00', 'before');
    // 09:00 Berlin (CEST) on 28 March 2027: 4 h before is quiet (to 22:00 CET), 1 h before is the edge (kept).
    const p = planLeads(new Date('2027-03-28T07:00:00.000Z'), [4 * H, H], 'Europe/Berlin', quiet, Date.parse('2027-03-01T00:00:00.000Z'));
    expect(p.leads!.map((l) => l.at!.toISOString())).toEqual(['2027-03-27T21:00:00.000Z', '2027-03-28T06:00:00.000Z']);
  });
});
