// Schedules of periodic jobs: next occurrence, the occurrence a late run
// stands for, time zones, and refusal of bad patterns.
import { describe, expect, it } from 'vitest';
import { QueueInputError } from '../../src/queue/errors.js';
import { checkSchedule, describeSchedule, nextAfterRun, nextOccurrence, occurrenceOf } from '../../src/queue/periodic/periodic.js';

const at = (iso: string) => Date.parse(iso);

describe('periodic schedules', () => {
  it('every N ms counts from the given time', () => {
    expect(nextOccurrence({ everyMs: 5_000 }, 1_000)).toBe(6_000);
    expect(occurrenceOf({ everyMs: 5_000 }, 1_234)).toBe(1_234);
  });

  it('finds the next 02:00 in a time zone, strictly after the given time', () => {
    const daily = { cron: '0 2 * * *', timezone: 'Asia/Shanghai' }; // UTC+8, no daylight saving
    expect(nextOccurrence(daily, at('2026-11-22T12:00:00Z'))).toBe(at('2026-11-22T18:00:00Z'));
    // At the occurrence itself: the next one, a day later, not the same again.
    expect(nextOccurrence(daily, at('2026-11-22T18:00:00Z'))).toBe(at('2026-11-23T18:00:00Z'));
    expect(nextOccurrence({ cron: '0 2 * * *', timezone: 'UTC' }, at('2026-11-22T12:00:00Z'))).toBe(at('2026-11-23T02:00:00Z'));
  });

  it('follows daylight saving in New York', () => {
    const ny = { cron: '30 2 * * *', timezone: 'America/New_York' };
    // In winter (EST, UTC-5) 02:30 is 07:30 UTC; in summer (EDT, UTC-4) 06:30 UTC.
    expect(nextOccurrence(ny, at('2026-01-10T00:00:00Z'))).toBe(at('2026-01-10T07:30:00Z'));
    expect(nextOccurrence(ny, at('2026-07-10T00:00:00Z'))).toBe(at('2026-07-10T06:30:00Z'));
    // 2026-03-08 has no 02:30 in New York: whatever the library makes of the gap,
    // it is one run that day (never two), and the next day is back at 02:30 EDT.
    const gap = nextOccurrence(ny, at('2026-03-08T05:00:00Z'));
    expect(gap).toBeGreaterThan(at('2026-03-08T05:00:00Z'));
    expect(nextOccurrence(ny, gap)).toBe(at('2026-03-09T06:30:00Z'));
  });

  it('maps a late or retried run to the occurrence it stands for', () => {
    const daily = { cron: '0 2 * * *', timezone: 'Asia/Shanghai' };
    expect(occurrenceOf(daily, at('2026-11-22T18:00:00Z'))).toBe(at('2026-11-22T18:00:00Z'));
    // Retried 30 s later, or run after three hours of downtime: still that night's occurrence.
    expect(occurrenceOf(daily, at('2026-11-22T18:00:30Z'))).toBe(at('2026-11-22T18:00:00Z'));
    expect(occurrenceOf(daily, at('2026-11-22T21:00:00Z'))).toBe(at('2026-11-22T18:00:00Z'));
  });

  it('refuses bad patterns, time zones and periods with a clear message', () => {
    expect(() => checkSchedule({ cron: '0 2 * *x *' })).toThrow(QueueInputError);
    expect(() => checkSchedule({ cron: '0 2 * * *', timezone: 'Mars/Olympus' })).toThrow(/Mars\/Olympus/);
    expect(() => checkSchedule({ everyMs: 0 })).toThrow(/everyMs/);
    expect(() => checkSchedule({ cron: '0 2 * * *', timezone: 'Europe/Berlin' })).not.toThrow();
    expect(describeSchedule({ cron: '0 2 * * *', timezone: 'Europe/Berlin' })).toBe('cron 0 2 * * * Europe/Berlin');
  });
});

describe('the time after a run', () => {
  const everyTwo = { cron: '*/2 * * * * *' };
  it('is the slot after the occurrence, even when the host clock runs a little ahead', () => {
    // Occurrence at :10; the run ended at :11.9 by a host clock 500 ms ahead of Redis.
    expect(nextAfterRun(everyTwo, at('2026-11-22T00:00:10Z'), at('2026-11-22T00:00:12.4Z'))).toBe(at('2026-11-22T00:00:12Z'));
  });
  it('skips the slots missed while the run was late, once it is more than the slack behind', () => {
    expect(nextAfterRun(everyTwo, at('2026-11-22T00:00:10Z'), at('2026-11-22T00:01:05Z'))).toBe(at('2026-11-22T00:01:06Z'));
  });
  it('counts an every-N-ms period from the end of the run', () => {
    expect(nextAfterRun({ everyMs: 1_000 }, 0, 5_000)).toBe(6_000);
  });
});
