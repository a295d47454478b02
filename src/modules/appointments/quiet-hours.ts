// When a reminder is planned: its start less its lead, moved out of the
// service's quiet hours (REMINDER_QUIET_HOURS, read as wall-clock time in the
// appointment's time zone) to the window's start before it, or its end after
// it, never to or past the appointment's start. Pure functions over instants
// (ms since epoch); wall clocks come from Intl, so daylight-saving changes
// are the time zone database's, not ours.

/** The quiet window: minutes after local midnight, `from` to `to`, wrapping midnight when `from` > `to`. */
export type QuietHours = { readonly from: number; readonly to: number; readonly shift: QuietShift };
/** Where a reminder planned inside the window goes: to the window's start (before) or its end (after). */
export type QuietShift = 'before' | 'after';

const DAY_MS = 86_400_000;
/** The furthest a shift moves a reminder before its planned time: a window is shorter than a day, and a day lasts 25 h at most. */
export const MAX_QUIET_SHIFT_SECONDS = 90_000;
const WINDOW = /^([01]\d|2[0-3]):([0-5]\d)-([01]\d|2[0-3]):([0-5]\d)$/;

/** `HH:MM-HH:MM` (24 h, start and end differ) as a window; null for anything else. */
export function parseQuietHours(text: string, shift: QuietShift): QuietHours | null {
  const m = WINDOW.exec(text);
  if (!m) return null;
  const from = Number(m[1]) * 60 + Number(m[2]);
  const to = Number(m[3]) * 60 + Number(m[4]);
  return from === to ? null : { from, to, shift };
}

const formats = new Map<string, Intl.DateTimeFormat>();
function formatOf(timeZone: string): Intl.DateTimeFormat {
  let f = formats.get(timeZone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
    formats.set(timeZone, f);
  }
  return f;
}

/**
 * The IANA name Intl knows `name` by (`europe/berlin` -> `Europe/Berlin`,
 * `US/Eastern` -> `America/New_York`), or null when it knows no such zone.
 * Offsets (`+01:00`) are not zones: they know no daylight saving.
 */
export function canonicalTimeZone(name: string): string | null {
  if (!/^[A-Za-z][A-Za-z0-9_+/-]{0,63}$/.test(name)) return null;
  try {
    return new Intl.DateTimeFormat('en-US', { timeZone: name }).resolvedOptions().timeZone;
  } catch {
    return null;
  }
}

/** The wall clock of instant `t` in `timeZone`, as if it were a UTC instant (ms), to the second. */
function wallOf(t: number, timeZone: string): number {
  const p = Object.fromEntries(
    formatOf(timeZone)
      .formatToParts(new Date(t))
      .map((x) => [x.type, Number(x.value)]),
  );
  return Date.UTC(p.year!, p.month! - 1, p.day!, p.hour!, p.minute!, p.second!);
}

/** The zone's offset from UTC at instant `t` (ms; Berlin in summer: 7 200 000). */
const offsetAt = (t: number, timeZone: string) => wallOf(t - (t % 1_000), timeZone) - (t - (t % 1_000));

/**
 * The instant whose wall clock in `timeZone` reads `wall` (a wall time as a
 * UTC instant). Read twice when the clock is set back: the first, or the
 * first after `after` when one is. Skipped when it is set forward: as far
 * past the change as `wall` is past the skipped hour's start (02:30 on the
 * spring day in Berlin is 03:30 CEST). Offsets are taken a day either side:
 * zones change them months apart.
 */
export function instantOf(wall: number, timeZone: string, after = -Infinity): number {
  const earlier = wall - offsetAt(wall - DAY_MS, timeZone);
  const later = wall - offsetAt(wall + DAY_MS, timeZone);
  const fits = (t: number) => wallOf(t, timeZone) === wall;
  if (fits(earlier) && fits(later)) {
    const [first, second] = [Math.min(earlier, later), Math.max(earlier, later)];
    return first > after ? first : second;
  }
  if (fits(later)) return later;
  return earlier;
}

/**
 * The window around instant `t` if `t` lies strictly inside it (its edges are
 * outside: a reminder at 22:00 or 08:00 stays), as the instants of its start
 * and its end; null otherwise.
 */
export function windowAround(t: number, timeZone: string, q: QuietHours): { start: number; end: number } | null {
  const wall = wallOf(t, timeZone) + (t % 1_000);
  const midnight = wall - (((wall % DAY_MS) + DAY_MS) % DAY_MS);
  const minute = (wall - midnight) / 60_000;
  // An end read twice (the clock set back inside the window) is the one after `t`.
  const at = (dayOffset: number, minutes: number, after?: number) => instantOf(midnight + dayOffset * DAY_MS + minutes * 60_000, timeZone, after);
  if (q.from < q.to) return minute > q.from && minute < q.to ? { start: at(0, q.from), end: at(0, q.to, t) } : null;
  if (minute > q.from) return { start: at(0, q.from), end: at(1, q.to, t) };
  if (minute < q.to) return { start: at(-1, q.from), end: at(0, q.to, t) };
  return null;
}

/**
 * When the reminder `leadSeconds` before `startsAt` is planned (ms), with
 * quiet hours `quiet` (null: none) in `timeZone`, at `now`. Outside the
 * window: the start less the lead, as without quiet hours (the statement
 * writing it makes a time already past the moment it commits). Inside it
 * (judged at now when that time has passed): the window's start, or its end
 * (as `quiet.shift` says), or the other edge when that one has passed or is
 * not before the start; when neither edge is ahead of now and before the
 * start (the appointment starts inside the window the reminder would wait
 * out, which has begun), the time as planned: a reminder inside quiet hours
 * rather than none.
 */
export function plannedRemindAt(startsAt: number, leadSeconds: number, timeZone: string, quiet: QuietHours | null, now: number): number {
  const planned = startsAt - leadSeconds * 1_000;
  if (!quiet) return planned;
  // A stored zone this runtime's time zone data does not know (written
  // under another): the reminder as planned rather than a failed change.
  try {
    formatOf(timeZone);
  } catch {
    return planned;
  }
  const w = windowAround(Math.max(planned, now), timeZone, quiet);
  if (!w) return planned;
  const edges = quiet.shift === 'before' ? [w.start, w.end] : [w.end, w.start];
  return edges.find((t) => t >= now && t < startsAt) ?? planned;
}
