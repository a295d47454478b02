// The quiet-hours arithmetic of appointment reminders on fixed instants: the
// window read as wall-clock time in the appointment's zone, across the
// daylight-saving changes of Europe/Berlin (29 March and 25 October 2026)
// and America/New_York (8 March and 1 November 2026).
import { describe, expect, it } from 'vitest';
import { canonicalTimeZone, instantOf, parseQuietHours, plannedRemindAt, type QuietHours } from '../../src/modules/appointments/quiet-hours.js';

const at = (iso: string) => Date.parse(iso);
const HOUR = 3_600;
const night = (shift: 'before' | 'after'): QuietHours => parseQuietHours('22:00-08:00', shift)!;
/** Long before every slot below: no edge has passed. */
const EARLY = at('2026-01-01T00:00:00Z');
const plan = (startsAt: string, leadS: number, zone: string, q: QuietHours | null, now = EARLY) =>
  new Date(plannedRemindAt(at(startsAt), leadS, zone, q, now)).toISOString();

describe('parseQuietHours', () => {
  it('reads HH:MM-HH:MM as minutes after midnight', () => {
    expect(parseQuietHours('22:00-08:00', 'before')).toEqual({ from: 1_320, to: 480, shift: 'before' });
    expect(parseQuietHours('12:30-14:05', 'after')).toEqual({ from: 750, to: 845, shift: 'after' });
  });
  it('refuses anything else', () => {
    for (const bad of ['', '22:00', '22-08', '24:00-08:00', '22:60-08:00', '22:00-22:00', ' 22:00-08:00', '22:00-08:00x', '2:00-08:00'])
      expect(parseQuietHours(bad, 'before'), bad).toBeNull();
  });
});

describe('canonicalTimeZone', () => {
  it('gives the IANA name Intl knows a zone by', () => {
    expect(canonicalTimeZone('Europe/Berlin')).toBe('Europe/Berlin');
    expect(canonicalTimeZone('europe/berlin')).toBe('Europe/Berlin');
    // Older time zone data answers the link's target, newer the link itself.
    expect(['America/New_York', 'US/Eastern']).toContain(canonicalTimeZone('US/Eastern'));
    expect(canonicalTimeZone('UTC')).toBe('UTC');
  });
  it('knows no offsets, unknown zones or garbage', () => {
    for (const bad of ['', '+01:00', 'Mars/Olympus', 'Europe/Berlin ', '../etc/passwd', 'x'.repeat(65), 'Europe\nBerlin'])
      expect(canonicalTimeZone(bad), bad).toBeNull();
  });
});

describe('instantOf', () => {
  it('takes the first of a wall time read twice, and one skipped as far past the change', () => {
    // Berlin, 25 October: 02:30 comes in CEST (00:30Z), then in CET (01:30Z).
    expect(new Date(instantOf(Date.UTC(2026, 9, 25, 2, 30), 'Europe/Berlin')).toISOString()).toBe('2026-10-25T00:30:00.000Z');
    // Berlin, 29 March: 02:30 does not exist; 03:30 CEST.
    expect(new Date(instantOf(Date.UTC(2026, 2, 29, 2, 30), 'Europe/Berlin')).toISOString()).toBe('2026-03-29T01:30:00.000Z');
    expect(new Date(instantOf(Date.UTC(2026, 2, 8, 2, 30), 'America/New_York')).toISOString()).toBe('2026-03-08T07:30:00.000Z');
  });
  it('takes the second of a wall time read twice when the first is not after the instant asked about', () => {
    expect(new Date(instantOf(Date.UTC(2026, 9, 25, 2, 30), 'Europe/Berlin', at('2026-10-25T00:30:00Z'))).toISOString()).toBe('2026-10-25T01:30:00.000Z');
  });
});

describe('plannedRemindAt', () => {
  it('never moves a reminder earlier with after, when the window ends inside the hour read twice', () => {
    // Berlin, 25 October, window 22:00-02:30: planned at the second 02:15 (CET, 01:15Z); the window ends at the second 02:30.
    const q = parseQuietHours('22:00-02:30', 'after')!;
    expect(plan('2026-10-25T05:15:00Z', 4 * HOUR, 'Europe/Berlin', q)).toBe('2026-10-25T01:30:00.000Z');
  });
  it('keeps the planned time for a zone this runtime does not know', () => {
    expect(plan('2026-06-01T01:00:00Z', HOUR, 'Mars/Olympus', night('before'))).toBe('2026-06-01T00:00:00.000Z');
  });

  it('is the start less the lead without quiet hours, or outside them', () => {
    expect(plan('2026-03-29T07:00:00Z', 4 * HOUR, 'Europe/Berlin', null)).toBe('2026-03-29T03:00:00.000Z');
    // 10:00 CEST: outside 22:00-08:00.
    expect(plan('2026-03-29T10:00:00Z', 2 * HOUR, 'Europe/Berlin', night('before'))).toBe('2026-03-29T08:00:00.000Z');
    // The window's edges are outside it: 08:00 and 22:00 local stay.
    expect(plan('2026-03-29T07:00:00Z', HOUR, 'Europe/Berlin', night('before'))).toBe('2026-03-29T06:00:00.000Z');
    expect(plan('2026-06-01T21:00:00Z', HOUR, 'Europe/Berlin', night('after'))).toBe('2026-06-01T20:00:00.000Z');
  });

  it('moves a reminder inside the window to its start or its end, across the spring change in Berlin', () => {
    // 09:00 CEST on 29 March, 4 h before: 05:00 CEST, inside. The window began at 22:00 CET the day before.
    expect(plan('2026-03-29T07:00:00Z', 4 * HOUR, 'Europe/Berlin', night('before'))).toBe('2026-03-28T21:00:00.000Z');
    expect(plan('2026-03-29T07:00:00Z', 4 * HOUR, 'Europe/Berlin', night('after'))).toBe('2026-03-29T06:00:00.000Z');
  });

  it('across the autumn change in Berlin', () => {
    // 09:00 CET on 25 October, 4 h before: 05:00 CET; the window began at 22:00 CEST.
    expect(plan('2026-10-25T08:00:00Z', 4 * HOUR, 'Europe/Berlin', night('before'))).toBe('2026-10-24T20:00:00.000Z');
    expect(plan('2026-10-25T08:00:00Z', 4 * HOUR, 'Europe/Berlin', night('after'))).toBe('2026-10-25T07:00:00.000Z');
  });

  it('across both changes in New York', () => {
    // 08:30 EDT on 8 March, 3 h before: 05:30 EDT; 22:00 EST the evening before, or 08:00 EDT.
    expect(plan('2026-03-08T12:30:00Z', 3 * HOUR, 'America/New_York', night('before'))).toBe('2026-03-08T03:00:00.000Z');
    expect(plan('2026-03-08T12:30:00Z', 3 * HOUR, 'America/New_York', night('after'))).toBe('2026-03-08T12:00:00.000Z');
    // 08:30 EST on 1 November, 3 h before: 05:30 EST; 22:00 EDT the evening before, or 08:00 EST.
    expect(plan('2026-11-01T13:30:00Z', 3 * HOUR, 'America/New_York', night('before'))).toBe('2026-11-01T02:00:00.000Z');
    expect(plan('2026-11-01T13:30:00Z', 3 * HOUR, 'America/New_York', night('after'))).toBe('2026-11-01T13:00:00.000Z');
  });

  it('reads the window in the appointment zone: one instant, quiet in one zone, not in another', () => {
    // 9 h before 12:00Z: 03:00Z, which is 05:00 CEST and 23:00 EDT (quiet), 12:00 JST (not).
    expect(plan('2026-06-01T12:00:00Z', 9 * HOUR, 'Europe/Berlin', night('before'))).toBe('2026-05-31T20:00:00.000Z');
    expect(plan('2026-06-01T12:00:00Z', 9 * HOUR, 'America/New_York', night('before'))).toBe('2026-06-01T02:00:00.000Z');
    expect(plan('2026-06-01T12:00:00Z', 9 * HOUR, 'Asia/Tokyo', night('before'))).toBe('2026-06-01T03:00:00.000Z');
  });

  it('never moves a reminder to or past the start: the other edge, or the time as planned', () => {
    // 07:30 CEST, 1 h before: 06:30; the window ends at 08:00, after the start: its start instead.
    expect(plan('2026-06-01T05:30:00Z', HOUR, 'Europe/Berlin', night('after'))).toBe('2026-05-31T20:00:00.000Z');
    // Booked at 23:00 CEST for 07:00 CEST, 30 min before: the window began, ends after the start: as planned.
    const now = at('2026-06-01T21:00:00Z');
    expect(plan('2026-06-02T05:00:00Z', 1_800, 'Europe/Berlin', night('before'), now)).toBe('2026-06-02T04:30:00.000Z');
  });

  it('judges a time already past at now: booked inside the window, the reminder waits for its end', () => {
    // Now 23:00 CEST; the slot at 10:00 CEST, 24 h before (passed): 08:00 CEST, before the start.
    const now = at('2026-06-01T21:00:00Z');
    expect(plan('2026-06-02T08:00:00Z', 24 * HOUR, 'Europe/Berlin', night('before'), now)).toBe('2026-06-02T06:00:00.000Z');
    // Now 20:00 CEST, outside: the time as planned (the statement makes it now).
    const early = at('2026-06-01T18:00:00Z');
    expect(plan('2026-06-02T08:00:00Z', 24 * HOUR, 'Europe/Berlin', night('before'), early)).toBe('2026-06-01T08:00:00.000Z');
  });

  it('takes a window within one day', () => {
    const lunch = parseQuietHours('12:00-14:00', 'after')!;
    expect(plan('2026-06-01T15:00:00Z', 2 * HOUR, 'UTC', lunch)).toBe('2026-06-01T14:00:00.000Z');
    expect(plan('2026-06-01T17:00:00Z', 2 * HOUR, 'UTC', lunch)).toBe('2026-06-01T15:00:00.000Z');
  });
});
