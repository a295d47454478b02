// Which key each lead's reminder has, through HTTP: one key per slot and lead
// for the life of the booking on that slot. A booking that held a list keeps
// the list form (a lead sent under `:<lead>` is not sent again under the key
// without a lead); the lead a one-lead booking's reminder was written for
// keeps that key when the booking takes a list on the slot (quiet hours can
// put a lead whose reminder went already ahead again); a one-lead reminder
// taken back under another lead names no lead; a plan made before the key
// lead was pinned is refused; a same-slot change leaving every lead skipped
// marks the booking reminded.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { waitFor } from '../../helpers/redis.js';
import { appointmentBody } from '../../helpers/bodies.js';
import { startWebhook, type Webhook } from '../../helpers/webhook.js';
import { startTestService, stopTestService, type TestService } from '../../helpers/service.js';
import type { ServiceModule } from '../../../src/core/module.js';
import type { Db } from '../../../src/core/db.js';
import { remindJobId } from '../../../src/modules/appointments/appointments.service.js';
import { createAppointmentsRepository } from '../../../src/modules/appointments/appointments.repository.js';

let tdb: TestDb;
let svc: TestService;
let hook: Webhook;
let baseEnv: Record<string, string>;

beforeAll(async () => {
  tdb = await createTestDb('appts_lead_keys');
  hook = await startWebhook();
  baseEnv = {
    NOTIFY_WEBHOOK_URL: hook.url,
    NOTIFY_RETRY_DELAYS_MS: '200',
    NOTIFY_RETRY_JITTER: '0',
    NOTIFY_MAX_ATTEMPTS: '50',
    WORKER_IDLE_RECHECK_MS: '200',
    NOTIFY_RELAY_INTERVAL_SECONDS: '3600',
    APPOINTMENT_RECONCILE_INTERVAL_SECONDS: '3600',
    APPOINTMENT_RECONCILE_GRACE_SECONDS: '0',
  };
  svc = await startTestService(tdb.url, baseEnv);
}, 60_000);
afterAll(async () => {
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

async function book(body: Record<string, unknown>): Promise<Answer> {
  const res = await svc.api().post('/appointments').send(appointmentBody(body));
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
/** The reminder row of lead `lead` once written. */
async function reminderOf(id: string, lead: number): Promise<Reminder> {
  let found: Reminder | undefined;
  expect(await waitFor(async () => (found = (await reminders(id)).find((r) => r.leadSeconds === lead)) !== undefined, 10_000, 50)).toBe(true);
  return found!;
}
const deliveredTo = (n: string) => hook.delivered.filter((c) => c.body.id === n).length;
const statusOf = async (n: string) => (await tdb.db.notification.findUniqueOrThrow({ where: { id: n } })).status;

describe('one key per slot and lead for the life of the booking on its slot', () => {
  const rowsOf = (id: string) =>
    tdb.db.notification.findMany({
      where: { appointmentId: id },
      select: { id: true, dedupeKey: true, status: true, payload: true },
      orderBy: { createdAt: 'asc' },
    });

  it('keeps the list form once a booking held a list: a lead sent under its own key is not sent again under the key without a lead', async () => {
    hook.setBehaviour(() => 'ok');
    const a = await book({ startsAt: startIn(12_000), remindBeforeSeconds: [60, 5] });
    expect(a.leads.map((l) => l.remindAt === null)).toEqual([true, false]);
    const five = await reminderOf(a.id, 5);
    expect(await waitFor(async () => (await statusOf(five.id)) === 'SENT', 15_000, 50)).toBe(true);
    // Cut to its key lead alone (skipped), then to 5 s alone again.
    const sixty = await patch(a.id, { remindBeforeSeconds: 60 });
    expect(sixty.leads).toEqual([{ leadSeconds: 60, remindAt: null }]);
    const again = await patch(a.id, { remindBeforeSeconds: 5 });
    expect(again.leads.map((l) => l.leadSeconds)).toEqual([5]);
    // Still the list form: 5 s keeps its `:5` reminder, SENT already.
    expect(await jobOf(a.id)).toBeNull();
    await new Promise((r) => setTimeout(r, 1_500));
    expect((await rowsOf(a.id)).map((n) => n.dedupeKey)).toEqual([`appointment-reminder:${a.id}:${Date.parse(a.startsAt)}:5`]);
    expect(deliveredTo(five.id)).toBe(1);
  });

  it('leaves a lead skipped while the list is cut to it alone, and marks such a booking reminded', async () => {
    hook.setBehaviour(() => 'ok');
    const a = await book({ startsAt: startIn(30_000), remindBeforeSeconds: [60, 20] });
    expect(a.leads.map((l) => l.remindAt === null)).toEqual([true, false]);
    const cut = await patch(a.id, { remindBeforeSeconds: 60 });
    // Not reminded at once: 60 s was skipped on this slot.
    expect(cut.leads).toEqual([{ leadSeconds: 60, remindAt: null }]);
    expect(await jobOf(a.id)).toBeNull();
    // Nothing to remind of: not left for the reconciliation pass to read.
    expect((await tdb.db.appointment.findUniqueOrThrow({ where: { id: a.id }, select: { reminded: true } })).reminded).toBe(true);
    expect((await appointments().reconcile.run(0)).written).toBe(0);
    expect(await reminders(a.id)).toEqual([]);
  });

  it('takes back a one-lead reminder moved away and back under another lead: its payload names no lead it does not have', async () => {
    hook.setBehaviour(() => 'fail');
    const home = startIn(8_000);
    const a = await book({ startsAt: home, remindBeforeSeconds: 6 });
    expect(await waitFor(async () => (await rowsOf(a.id)).length === 1, 10_000, 50)).toBe(true);
    await patch(a.id, { startsAt: new Date(Date.parse(home) + 600_000).toISOString() });
    expect((await rowsOf(a.id)).map((n) => n.status)).toEqual(['CANCELLED']);
    const back = await patch(a.id, { startsAt: home, remindBeforeSeconds: 2 });
    expect(back.leads.map((l) => l.leadSeconds)).toEqual([2]);
    hook.setBehaviour(() => 'ok');
    expect(await waitFor(async () => (await rowsOf(a.id)).some((n) => n.status === 'SENT'), 15_000, 50)).toBe(true);
    const [n] = await rowsOf(a.id);
    expect(n!.dedupeKey).toBe(`appointment-reminder:${a.id}:${Date.parse(home)}`);
    expect(n!.payload).not.toHaveProperty('leadSeconds');
    const calls = hook.delivered.filter((c) => c.body.id === n!.id);
    expect(calls.length).toBe(1);
    expect(calls[0]!.raw).not.toContain('leadSeconds');
    expect((await reminders(a.id)).map((r) => r.leadSeconds)).toEqual([null]);
  });

  it('keeps the key with the lead it was written for when a one-lead booking takes a list on its slot', async () => {
    // Quiet hours from the next whole minute (w) for 10 min, in UTC: a lead
    // whose time falls inside goes at w, or at its own time once w has passed.
    if (60_000 - (Date.now() % 60_000) < 25_000) await new Promise((r) => setTimeout(r, 60_000 - (Date.now() % 60_000) + 100));
    const w = Math.ceil(Date.now() / 60_000) * 60_000;
    const hhmm = (ms: number) => new Date(ms).toISOString().slice(11, 16);
    const night = await startTestService(tdb.url, { ...baseEnv, REMINDER_QUIET_HOURS: `${hhmm(w)}-${hhmm(w + 600_000)}` });
    try {
      hook.setBehaviour(() => 'ok');
      const startsAt = new Date(w + 90_000).toISOString();
      const res = await night
        .api()
        .post('/appointments')
        .send(appointmentBody({ startsAt, remindBeforeSeconds: 60, timeZone: 'UTC' }));
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      const a = res.body as Answer;
      expect(a.remindAt).toBe(new Date(w).toISOString());
      // Sent at w under the key without a lead, for 60 s.
      expect(await waitFor(async () => (await rowsOf(a.id)).some((n) => n.status === 'SENT'), w - Date.now() + 15_000, 100)).toBe(true);
      const one = (await night.api().patch(`/appointments/${a.id}`).send({ remindBeforeSeconds: 5 })).body as Answer;
      expect(one.remindBeforeSeconds).toBe(5);
      const list = await night
        .api()
        .patch(`/appointments/${a.id}`)
        .send({ remindBeforeSeconds: [60, 5] });
      expect(list.status, JSON.stringify(list.body)).toBe(200);
      // 60 s keeps the key it was sent under (its time w + 30 s is ahead, and stays its reminder); 5 s has its own.
      expect((list.body as Answer).leads.map((l) => l.leadSeconds)).toEqual([60, 5]);
      await new Promise((r) => setTimeout(r, Math.max(0, w + 30_000 - Date.now()) + 2_500));
      const rows = await rowsOf(a.id);
      expect(rows.map((n) => n.dedupeKey)).toEqual([`appointment-reminder:${a.id}:${w + 90_000}`]);
      expect(deliveredTo(rows[0]!.id)).toBe(1);
    } finally {
      await stopTestService(night);
    }
  }, 150_000);

  it('refuses a plan made before the key lead was pinned: planned again', async () => {
    const a = await book({ startsAt: startIn(7_200_000), remindBeforeSeconds: 600 });
    const repo = createAppointmentsRepository(tdb.db as unknown as Db);
    const read = (await repo.find('default', a.id))!;
    expect([read.oneLead, read.pinnedKeyLead]).toEqual([true, null]);
    // As a writer pinning it would (a reminder written under the key without a lead for 600 s).
    await tdb.db.$executeRaw`UPDATE appointments SET key_lead = 600 WHERE id = ${a.id}::uuid`;
    const plan = { was: read, timeZone: read.timeZone, remindAt: read.remindAt };
    expect(await repo.reschedule('default', a.id, null, 300, plan)).toBeNull();
    expect(await repo.reschedule('default', a.id, null, 300, { ...plan, was: { ...read, pinnedKeyLead: 600 } })).not.toBeNull();
  });
});
