// Several reminder leads per appointment through HTTP: one reminder per slot
// and lead, each delivered once; a move moves every lead's job, a cancel
// withdraws every lead's reminder; a lead list changed while one reminder's
// call runs leaves that call to decide, withdraws a dropped lead's reminder
// and gives an added lead its reminder while its time is ahead; quiet hours
// apply to each lead; the reconciliation pass repairs each lead's job and
// writes each overdue lead; bad lead lists are refused with nothing written;
// one lead answers as it always did.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { waitFor } from '../../helpers/redis.js';
import { appointmentBody } from '../../helpers/bodies.js';
import { startWebhook, type Webhook } from '../../helpers/webhook.js';
import { startTestService, stopTestService, type TestService } from '../../helpers/service.js';
import type { ServiceModule } from '../../../src/core/module.js';
import { remindJobId } from '../../../src/modules/appointments/appointments.service.js';
import { MAX_LEAD_SECONDS } from '../../../src/modules/appointments/appointments.schemas.js';

let tdb: TestDb;
let svc: TestService;
let quiet: TestService;
let hook: Webhook;

beforeAll(async () => {
  tdb = await createTestDb('appts_leads');
  hook = await startWebhook();
  const env = {
    NOTIFY_WEBHOOK_URL: hook.url,
    NOTIFY_RETRY_DELAYS_MS: '200',
    NOTIFY_RETRY_JITTER: '0',
    NOTIFY_MAX_ATTEMPTS: '50',
    WORKER_IDLE_RECHECK_MS: '200',
    NOTIFY_RELAY_INTERVAL_SECONDS: '3600',
    APPOINTMENT_RECONCILE_INTERVAL_SECONDS: '3600',
    APPOINTMENT_RECONCILE_GRACE_SECONDS: '0',
  };
  svc = await startTestService(tdb.url, env);
  // Quiet hours, answers only: no worker, so nothing it plans is sent.
  quiet = await startTestService(tdb.url, { ...env, REMINDER_QUIET_HOURS: '22:00-08:00', APPOINTMENT_DEFAULT_TIME_ZONE: 'Europe/Berlin' }, 'api');
}, 60_000);
afterAll(async () => {
  await stopTestService(quiet);
  await stopTestService(svc, tdb);
  await hook?.close();
});

type Lead = { leadSeconds: number; remindAt: string | null };
type Answer = { id: string; startsAt: string; remindAt: string; remindBeforeSeconds: number | number[]; leads: Lead[]; status: string };
type Reminder = { id: string; startsAt: string; leadSeconds: number | null; status: string };

const appointments = () => svc.module('appointments') as ServiceModule & { reconcile: { run(h: number): Promise<{ written: number; jobsSet: number }> } };
const jobOf = (id: string, lead: number | null = null) => appointments().queue.get(remindJobId(id, lead));
/** A start `ms` from now, in whole seconds (a lead's time is then whole seconds too). */
const startIn = (ms: number) => new Date(Math.ceil((Date.now() + ms) / 1_000) * 1_000).toISOString();

async function book(body: Record<string, unknown>, s = svc): Promise<Answer> {
  const res = await s.api().post('/appointments').send(appointmentBody(body));
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body as Answer;
}
async function patch(id: string, body: Record<string, unknown>): Promise<Answer> {
  const res = await svc.api().patch(`/appointments/${id}`).send(body);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body as Answer;
}
async function reminders(id: string): Promise<Reminder[]> {
  const res = await svc.api().get(`/appointments/${id}`);
  expect(res.status).toBe(200);
  return res.body.reminders as Reminder[];
}
/** The reminder row of lead `lead` once written (its webhook body id). */
async function reminderOf(id: string, lead: number): Promise<Reminder> {
  let found: Reminder | undefined;
  expect(await waitFor(async () => (found = (await reminders(id)).find((r) => r.leadSeconds === lead)) !== undefined, 10_000, 50)).toBe(true);
  return found!;
}
const deliveredTo = (n: string) => hook.delivered.filter((c) => c.body.id === n).length;
const callsTo = (n: string) => hook.calls.filter((c) => c.body.id === n).length;
const statusOf = async (n: string) => (await tdb.db.notification.findUniqueOrThrow({ where: { id: n } })).status;

describe('bad lead lists', () => {
  const bad: [string, unknown][] = [
    ['more than five', [600, 500, 400, 300, 200, 100]],
    ['duplicates', [3_600, 600, 3_600]],
    ['a fraction', [3_600, 1.5]],
    ['a string', [3_600, '600']],
    ['a negative lead', [3_600, -1]],
    ['a lead past 30 days', [3_600, MAX_LEAD_SECONDS + 1]],
    ['an empty list', []],
    ['an object', { a: 1 }],
  ];
  it.each(bad)('refuses %s with 400 problem+json, nothing written', async (_, remindBeforeSeconds) => {
    const before = await tdb.db.appointment.count();
    const res = await svc.api().post('/appointments').send(appointmentBody({ remindBeforeSeconds }));
    expect(res.status).toBe(400);
    expect(res.headers['content-type']).toMatch(/application\/problem\+json/);
    expect(res.body.code).toBe('VALIDATION_FAILED');
    expect(await tdb.db.appointment.count()).toBe(before);

    const a = await book({ startsAt: startIn(7_200_000), remindBeforeSeconds: [3_600, 600] });
    const row = await tdb.db.appointment.findUniqueOrThrow({ where: { id: a.id } });
    const p = await svc.api().patch(`/appointments/${a.id}`).send({ remindBeforeSeconds });
    expect(p.status).toBe(400);
    expect(p.body.code).toBe('VALIDATION_FAILED');
    expect(await tdb.db.appointment.findUniqueOrThrow({ where: { id: a.id } })).toEqual(row);
  });
});

describe('several leads', () => {
  it('answers one lead as before: a number, one lead listed, the job without a lead', async () => {
    const a = await book({ startsAt: startIn(7_200_000), remindBeforeSeconds: 3_600 });
    expect(a.remindBeforeSeconds).toBe(3_600);
    expect(a.leads).toEqual([{ leadSeconds: 3_600, remindAt: a.remindAt }]);
    expect((await jobOf(a.id))?.dueAt).toBe(Date.parse(a.remindAt));
  });

  it('plans a reminder per lead, longest first, each with its own job', async () => {
    const startsAt = startIn(7_200_000);
    const a = await book({ startsAt, remindBeforeSeconds: [600, 3_600] });
    const at = (lead: number) => new Date(Date.parse(startsAt) - lead * 1_000).toISOString();
    expect(a.remindBeforeSeconds).toEqual([3_600, 600]);
    expect(a.leads).toEqual([
      { leadSeconds: 3_600, remindAt: at(3_600) },
      { leadSeconds: 600, remindAt: at(600) },
    ]);
    expect(a.remindAt).toBe(at(3_600));
    // The first lead keeps the job id of one-lead bookings; the other's ends in its lead.
    expect((await jobOf(a.id))?.dueAt).toBe(Date.parse(at(3_600)));
    expect((await jobOf(a.id, 600))?.dueAt).toBe(Date.parse(at(600)));
  });

  it('delivers both reminders, once each, at their times', async () => {
    hook.setBehaviour(() => 'ok');
    const startsAt = startIn(9_000);
    const a = await book({ startsAt, remindBeforeSeconds: [7, 3] });
    const first = await reminderOf(a.id, 7);
    const second = await reminderOf(a.id, 3);
    expect(await waitFor(async () => (await statusOf(second.id)) === 'SENT' && (await statusOf(first.id)) === 'SENT', 15_000, 50)).toBe(true);
    expect([deliveredTo(first.id), deliveredTo(second.id)]).toEqual([1, 1]);
    // Neither was written before its time.
    const rows = await tdb.db.notification.findMany({ where: { appointmentId: a.id } });
    for (const r of rows) {
      const lead = (r.payload as { leadSeconds: number }).leadSeconds;
      expect(r.createdAt.getTime()).toBeGreaterThanOrEqual(Date.parse(startsAt) - lead * 1_000 - 50);
    }
    expect(rows).toHaveLength(2);
  });

  it('moves every lead with the slot', async () => {
    const a = await book({ startsAt: startIn(7_200_000), remindBeforeSeconds: [3_600, 600] });
    const startsAt = startIn(14_400_000);
    const moved = await patch(a.id, { startsAt });
    const at = (lead: number) => Date.parse(startsAt) - lead * 1_000;
    expect(moved.leads.map((l) => Date.parse(l.remindAt!))).toEqual([at(3_600), at(600)]);
    expect((await jobOf(a.id))?.dueAt).toBe(at(3_600));
    expect((await jobOf(a.id, 600))?.dueAt).toBe(at(600));
  });

  it('withdraws every lead on cancel: the written ones CANCELLED, the jobs gone', async () => {
    hook.setBehaviour(() => 'fail');
    const a = await book({ startsAt: startIn(20_000), remindBeforeSeconds: [3_600, 15, 5] });
    // 3 600 s has passed: skipped (two reminders are still to come).
    expect(a.leads.map((l) => l.remindAt === null)).toEqual([true, false, false]);
    expect(await jobOf(a.id)).toBeNull();
    const first = await reminderOf(a.id, 15);
    expect((await svc.api().post(`/appointments/${a.id}/cancel`)).status).toBe(200);
    expect(await waitFor(async () => (await statusOf(first.id)) === 'CANCELLED', 5_000, 20)).toBe(true);
    expect(await jobOf(a.id, 5)).toBeNull();
    hook.setBehaviour(() => 'ok');
    expect((await reminders(a.id)).map((r) => r.leadSeconds)).toEqual([15]);
  });

  it('a move away withdraws the written reminders of every lead; back again takes back the one it plans', async () => {
    hook.setBehaviour(() => 'fail');
    const home = startIn(60_000);
    const a = await book({ startsAt: home, remindBeforeSeconds: [59, 58] });
    const [x, y] = [await reminderOf(a.id, 59), await reminderOf(a.id, 58)];
    await patch(a.id, { startsAt: startIn(7_200_000) });
    expect([await statusOf(x.id), await statusOf(y.id)]).toEqual(['CANCELLED', 'CANCELLED']);
    // Back: both times have passed, so one reminder at once, the shortest lead's (taken back); the other skipped.
    const back = await patch(a.id, { startsAt: home });
    expect(back.leads.map((l) => l.remindAt === null)).toEqual([true, false]);
    hook.setBehaviour(() => 'ok');
    expect(await waitFor(async () => (await statusOf(y.id)) === 'SENT', 10_000, 50)).toBe(true);
    expect([deliveredTo(x.id), deliveredTo(y.id)]).toEqual([0, 1]);
    expect(await statusOf(x.id)).toBe('CANCELLED');
  });
});

describe('a lead list changed while one of its reminders is being sent', () => {
  it('leaves the running call to decide, withdraws a dropped lead, gives an added lead its reminder', async () => {
    hook.setBehaviour((_, body) => ((body as { kind: string }).kind === 'APPOINTMENT_REMINDER' ? { slowMs: 800, then: 'ok' } : 'ok'));
    const startsAt = startIn(12_000);
    const a = await book({ startsAt, remindBeforeSeconds: [10, 2] });
    const first = await reminderOf(a.id, 10);
    expect(await waitFor(() => callsTo(first.id) === 1, 5_000, 5)).toBe(true);
    // Mid-call: 10 s dropped (its call runs on), 2 s dropped before its time, 5 s added (ahead).
    const changed = await patch(a.id, { remindBeforeSeconds: [5, 4] });
    expect(changed.remindBeforeSeconds).toEqual([5, 4]);
    expect(changed.leads.every((l) => l.remindAt !== null)).toBe(true);
    // The running call went through: SENT, once, though its lead is gone.
    expect(await waitFor(async () => (await statusOf(first.id)) === 'SENT', 5_000, 20)).toBe(true);
    expect(deliveredTo(first.id)).toBe(1);
    const [five, four] = [await reminderOf(a.id, 5), await reminderOf(a.id, 4)];
    expect(await waitFor(async () => (await statusOf(five.id)) === 'SENT' && (await statusOf(four.id)) === 'SENT', 10_000, 50)).toBe(true);
    // The dropped 2 s lead: never written, never called.
    await new Promise((r) => setTimeout(r, Math.max(0, Date.parse(startsAt) - 2_000 - Date.now()) + 500));
    expect((await reminders(a.id)).map((r) => r.leadSeconds).sort((x, y) => x! - y!)).toEqual([4, 5, 10]);
    expect(callsTo(first.id)).toBe(1);
  });

  it('withdraws the written, undelivered reminder of a lead dropped on the same slot, and keeps the others', async () => {
    hook.setBehaviour(() => 'fail');
    const a = await book({ startsAt: startIn(60_000), remindBeforeSeconds: [59, 58, 30] });
    const [x, y] = [await reminderOf(a.id, 59), await reminderOf(a.id, 58)];
    await patch(a.id, { remindBeforeSeconds: [58, 30] });
    // Withdrawn at once, or, when the patch met one of its failing calls running (SENDING), once that call ends.
    expect(await waitFor(async () => (await statusOf(x.id)) === 'CANCELLED', 5_000, 20)).toBe(true);
    expect(await statusOf(y.id)).not.toBe('CANCELLED');
    hook.setBehaviour(() => 'ok');
    expect(await waitFor(async () => (await statusOf(y.id)) === 'SENT', 10_000, 50)).toBe(true);
    expect([deliveredTo(x.id), deliveredTo(y.id)]).toEqual([0, 1]);
    expect(await statusOf(x.id)).toBe('CANCELLED');
  });

  it('skips a lead added whose time has passed while another reminder is still to come', async () => {
    hook.setBehaviour(() => 'ok');
    const a = await book({ startsAt: startIn(600_000), remindBeforeSeconds: 60 });
    const changed = await patch(a.id, { remindBeforeSeconds: [3_600, 60] });
    expect(changed.leads).toEqual([
      { leadSeconds: 3_600, remindAt: null },
      { leadSeconds: 60, remindAt: a.remindAt },
    ]);
    // The 60 s reminder keeps its job and id: the same reminder as before.
    expect((await jobOf(a.id))?.dueAt).toBe(Date.parse(a.remindAt));
    expect(await jobOf(a.id, 3_600)).toBeNull();
  });
});

describe('quiet hours 22:00-08:00 (Europe/Berlin), per lead', () => {
  it('moves each lead planned in the night to 22:00 the evening before, and leaves one outside as planned', async () => {
    // 09:00 CEST on 28 March 2027: 4 h before is 05:00 (quiet: 22:00 CET the evening before), 1 h before is 08:00 (the edge: as planned).
    const a = await book({ startsAt: '2027-03-28T07:00:00.000Z', remindBeforeSeconds: [3_600, 14_400] }, quiet);
    expect(a.leads).toEqual([
      { leadSeconds: 14_400, remindAt: '2027-03-27T21:00:00.000Z' },
      { leadSeconds: 3_600, remindAt: '2027-03-28T06:00:00.000Z' },
    ]);
    // Two leads inside one night: both at the window's start.
    const b = await book({ startsAt: '2027-10-31T08:00:00.000Z', remindBeforeSeconds: [14_400, 10_800] }, quiet);
    expect(b.leads.map((l) => l.remindAt)).toEqual(['2027-10-30T20:00:00.000Z', '2027-10-30T20:00:00.000Z']);
    expect(b.remindAt).toBe('2027-10-30T20:00:00.000Z');
  });
});

describe('the reconciliation pass, per lead', () => {
  it('sets each lead coming within its horizon its job, and writes each overdue lead', async () => {
    hook.setBehaviour(() => 'fail');
    const a = await book({ startsAt: startIn(600_000), remindBeforeSeconds: [500, 400] });
    await appointments().queue.cancel(remindJobId(a.id));
    await appointments().queue.cancel(remindJobId(a.id, 400));
    await appointments().reconcile.run(300_000);
    expect((await jobOf(a.id))?.dueAt).toBe(Date.parse(a.leads[0]!.remindAt!));
    expect((await jobOf(a.id, 400))?.dueAt).toBe(Date.parse(a.leads[1]!.remindAt!));

    // Both due, their jobs lost (cancelled some 5 s before they come due): the pass writes both.
    const b = await book({ startsAt: startIn(65_000), remindBeforeSeconds: [60, 59] });
    await appointments().queue.cancel(remindJobId(b.id));
    await appointments().queue.cancel(remindJobId(b.id, 59));
    expect(await reminders(b.id)).toEqual([]);
    await new Promise((r) => setTimeout(r, Math.max(0, Date.parse(b.leads[1]!.remindAt!) - Date.now()) + 50));
    expect((await appointments().reconcile.run(0)).written).toBe(2);
    expect((await reminders(b.id)).map((r) => r.leadSeconds).sort((x, y) => x! - y!)).toEqual([59, 60]);
    hook.setBehaviour(() => 'ok');
  });
});
