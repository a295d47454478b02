// Reminder quiet hours through HTTP: the remind time a booking, a move, a
// lead change and a zone change answer and schedule, moved out of the window
// (22:00-08:00, to its start) in the appointment's zone across the 2027
// daylight-saving changes of Europe/Berlin and America/New_York; the other
// edge when one has passed, never past the start; a reminder written at the
// window's start by a service whose window opens a minute from now; bad time
// zones refused with nothing written.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { waitFor } from '../../helpers/redis.js';
import { appointmentBody } from '../../helpers/bodies.js';
import { remindJobId } from '../../../src/modules/appointments/appointments.service.js';
import { startTestService, stopTestService, type TestService } from '../../helpers/service.js';

let tdb: TestDb;
let svc: TestService;
let live: TestService;
/** The live service's window (UTC, whole minutes): it opens at least 10 s after its start. */
let window: { start: number; end: number };

const HOUR = 3_600;
const hhmm = (t: number) => new Date(t).toISOString().slice(11, 16);

beforeAll(async () => {
  tdb = await createTestDb('appts_quiet');
  const quiet = { APPOINTMENT_RECONCILE_INTERVAL_SECONDS: '3600', NOTIFY_RELAY_INTERVAL_SECONDS: '3600' };
  svc = await startTestService(tdb.url, { ...quiet, REMINDER_QUIET_HOURS: '22:00-08:00', APPOINTMENT_DEFAULT_TIME_ZONE: 'Europe/Berlin' });
  const start = Math.ceil((Date.now() + 10_000) / 60_000) * 60_000;
  window = { start, end: start + 120_000 };
  live = await startTestService(tdb.url, { ...quiet, REMINDER_QUIET_HOURS: `${hhmm(window.start)}-${hhmm(window.end)}`, APPOINTMENT_DEFAULT_TIME_ZONE: 'UTC' });
}, 60_000);
afterAll(async () => {
  await stopTestService(live);
  await stopTestService(svc, tdb);
});

type Answer = { id: string; remindAt: string; startsAt: string; timeZone: string; remindBeforeSeconds: number };
async function book(startsAt: string, lead: number, timeZone?: string, s = svc): Promise<Answer> {
  const res = await s
    .api()
    .post('/appointments')
    .send(appointmentBody({ customerId: 'quiet', startsAt, remindBeforeSeconds: lead, ...(timeZone && { timeZone }) }));
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body as Answer;
}
async function patch(id: string, body: Record<string, unknown>): Promise<Answer> {
  const res = await svc.api().patch(`/appointments/${id}`).send(body);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body as Answer;
}
/** The remind time the answer gives, the row holds and the reminder job is due at: one instant. */
async function remindsAt(a: Answer, iso: string): Promise<void> {
  expect(a.remindAt).toBe(iso);
  expect((await tdb.db.appointment.findUniqueOrThrow({ where: { id: a.id } })).remindAt.toISOString()).toBe(iso);
  expect((await svc.module('appointments').queue.get(remindJobId(a.id)))?.dueAt).toBe(Date.parse(iso));
}

describe('quiet hours 22:00-08:00, to the start of the window', () => {
  it('moves a reminder planned in the Berlin night to 22:00 the evening before, across both changes of 2027', async () => {
    // 09:00 CEST on 28 March (the spring change), 4 h before: 05:00 CEST; the window began at 22:00 CET.
    const spring = await book('2027-03-28T07:00:00.000Z', 4 * HOUR, 'Europe/Berlin');
    expect(spring.timeZone).toBe('Europe/Berlin');
    await remindsAt(spring, '2027-03-27T21:00:00.000Z');
    // 09:00 CET on 31 October (the autumn change): 05:00 CET; the window began at 22:00 CEST.
    await remindsAt(await book('2027-10-31T08:00:00.000Z', 4 * HOUR, 'Europe/Berlin'), '2027-10-30T20:00:00.000Z');
    // Outside the window (14:00 CEST, 2 h before): as planned.
    await remindsAt(await book('2027-03-28T14:00:00.000Z', 2 * HOUR, 'Europe/Berlin'), '2027-03-28T12:00:00.000Z');
  });

  it('in New York, across both changes of 2027', async () => {
    // 08:30 EDT on 14 March, 3 h before: 05:30 EDT; 22:00 EST the evening before.
    await remindsAt(await book('2027-03-14T12:30:00.000Z', 3 * HOUR, 'America/New_York'), '2027-03-14T03:00:00.000Z');
    // 08:30 EST on 7 November: 05:30 EST; 22:00 EDT the evening before.
    await remindsAt(await book('2027-11-07T13:30:00.000Z', 3 * HOUR, 'America/New_York'), '2027-11-07T02:00:00.000Z');
  });

  it('reads the window in the zone the booking gives, else in the default zone, and keeps the name Intl gives', async () => {
    // 03:00Z: 05:00 CEST (quiet), 12:00 JST (not).
    const berlin = await book('2027-06-01T12:00:00.000Z', 9 * HOUR);
    expect(berlin.timeZone).toBe('Europe/Berlin');
    await remindsAt(berlin, '2027-05-31T20:00:00.000Z');
    const tokyo = await book('2027-06-01T12:00:00.000Z', 9 * HOUR, 'asia/tokyo');
    expect(tokyo.timeZone).toBe('Asia/Tokyo');
    await remindsAt(tokyo, '2027-06-01T03:00:00.000Z');
    expect((await svc.api().get(`/appointments/${tokyo.id}`)).body).toMatchObject({ timeZone: 'Asia/Tokyo', remindAt: '2027-06-01T03:00:00.000Z' });
  });

  it('plans again on a move, a lead change and a zone change', async () => {
    const a = await book('2027-06-01T12:00:00.000Z', 2 * HOUR, 'Europe/Berlin');
    await remindsAt(a, '2027-06-01T10:00:00.000Z');
    // To 07:00 CEST, 2 h before: 05:00, quiet.
    const moved = await patch(a.id, { startsAt: '2027-06-02T05:00:00.000Z' });
    await remindsAt(moved, '2027-06-01T20:00:00.000Z');
    // 1 h before: 06:00, still quiet.
    const lead = await patch(a.id, { remindBeforeSeconds: HOUR });
    expect(lead.remindBeforeSeconds).toBe(HOUR);
    await remindsAt(lead, '2027-06-01T20:00:00.000Z');
    // In New York 04:00Z is midnight, quiet too: 22:00 EDT.
    await remindsAt(await patch(a.id, { timeZone: 'America/New_York' }), '2027-06-02T02:00:00.000Z');
    // In Tokyo 13:00: as planned.
    await remindsAt(await patch(a.id, { timeZone: 'Asia/Tokyo' }), '2027-06-02T04:00:00.000Z');
  });

  it('takes the window end when its start has passed, and never a time at or past the start', async () => {
    // A whole-hour zone where it is now 01:xx: the window began at 22:00 and ends at 08:00.
    const hourNow = new Date().getUTCHours();
    const ahead = (((1 - hourNow) % 24) + 24) % 24;
    const offset = ahead > 14 ? ahead - 24 : ahead;
    const zone = offset === 0 ? 'UTC' : `Etc/GMT${offset > 0 ? '-' : '+'}${Math.abs(offset)}`;
    const localMidnight = Math.floor((Date.now() + offset * HOUR * 1_000) / 86_400_000) * 86_400_000 - offset * HOUR * 1_000;
    const local = (h: number, m = 0) => new Date(localMidnight + (h * 60 + m) * 60_000).toISOString();
    // At 09:00 local, 2 h before (07:00, quiet): 22:00 has passed, so 08:00.
    await remindsAt(await book(local(9), 2 * HOUR, zone), local(8));
    // At 07:30 local, 10 min before: both edges out of reach, as planned.
    await remindsAt(await book(local(7, 30), 600, zone), local(7, 20));
  });
});

describe('a live window', () => {
  it('writes the reminder at the window start, not at the time planned inside it', async () => {
    const startsAt = window.start + 100_000;
    const a = await book(new Date(startsAt).toISOString(), 60, undefined, live);
    expect(a.timeZone).toBe('UTC');
    expect(a.remindAt).toBe(new Date(window.start).toISOString());
    const written = () => tdb.db.notification.findFirst({ where: { appointmentId: a.id } });
    expect(await waitFor(async () => (await written()) !== null, window.start - Date.now() + 30_000, 100)).toBe(true);
    const n = (await written())!;
    expect(n.createdAt.getTime()).toBeGreaterThanOrEqual(window.start);
    // Planned at window.start + 40 s: written well before.
    expect(n.createdAt.getTime()).toBeLessThan(window.start + 40_000);
  }, 150_000);
});

describe('bad time zones: 400 VALIDATION_FAILED naming the field, nothing written', () => {
  const counts = async () => ({ appointments: await tdb.db.appointment.count(), notifications: await tdb.db.notification.count() });
  const bad: unknown[] = ['+01:00', 'Mars/Olympus', '', 'Europe/Berlin ', 'x'.repeat(65), 'Europe\nBerlin', 3_600, null, ['Europe/Berlin'], { zone: 'UTC' }];

  it.each(bad.map((v) => [JSON.stringify(v), v]))('a booking with timeZone %s', async (_, timeZone) => {
    const before = await counts();
    const res = await svc
      .api()
      .post('/appointments')
      .send(appointmentBody({ customerId: 'quiet-bad', timeZone }));
    expect(res.status).toBe(400);
    expect(res.headers['content-type']).toMatch(/application\/problem\+json/);
    expect(res.body.code).toBe('VALIDATION_FAILED');
    expect(JSON.stringify(res.body.errors)).toContain('timeZone');
    expect(await counts()).toEqual(before);
  });

  it('a move with a bad timeZone changes nothing', async () => {
    const a = await book('2027-06-01T12:00:00.000Z', HOUR, 'Europe/Berlin');
    const row = await tdb.db.appointment.findUniqueOrThrow({ where: { id: a.id } });
    for (const timeZone of bad) {
      const res = await svc.api().patch(`/appointments/${a.id}`).send({ timeZone, startsAt: '2027-06-03T12:00:00.000Z' });
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('VALIDATION_FAILED');
    }
    expect(await tdb.db.appointment.findUniqueOrThrow({ where: { id: a.id } })).toEqual(row);
  });
});
