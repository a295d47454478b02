// A notification the receiver refused is called again only after an
// operator's redrive, recorded in PostgreSQL before the job moves: two ways a
// delivery comes back by itself as a first attempt due later than the refused
// call, which a rule read from Redis (attempts, due times) took for a redrive
// (adversarial review, 2026-11-25):
// - Redis loses the claim while the refused call runs; the delivery claimed
//   again finds the row SENDING and is handed back with its attempt refunded;
// - a reminder is taken back (its slot left and held again) while its refused
//   call runs: no fault at all, the take-back replaces the job.
// And what a second review found in that record (a redrive that did not
// happen, the relay giving up a redriven row, a refused reminder withdrawn and
// taken back as new).
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { redriveOne } from '../../../src/modules/admin/redrive.js';
import { DELIVER_JOB, deliverJobId, scheduleDeliveries } from '../../../src/modules/notifications/notifications.jobs.js';
import { createDeliveries } from '../../../src/core/delivery/index.js';
import { createNotificationsRepository } from '../../../src/modules/notifications/notifications.repository.js';
import type { Queue } from '../../../src/queue/index.js';
import { appointmentBody } from '../../helpers/bodies.js';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { waitFor } from '../../helpers/redis.js';
import { startTestService, stopTestService, type TestService } from '../../helpers/service.js';
import { type Answer, startWebhook, type Webhook } from '../../helpers/webhook.js';

const LEASE_MS = 6_000;
const TIMEOUT_MS = 2_500;
/** How long the refused call takes: the window in which the delivery comes back. */
const SLOW_MS = 1_500;
const slot = (minutes: number) => new Date(Math.ceil(Date.now() / 60_000) * 60_000 + minutes * 60_000).toISOString();

let tdb: TestDb;
let svc: TestService;
let hook: Webhook;
beforeAll(async () => {
  tdb = await createTestDb('notify_redrive');
  hook = await startWebhook();
  svc = await startTestService(tdb.url, {
    NOTIFY_WEBHOOK_URL: hook.url,
    NOTIFY_RETRY_DELAYS_MS: '200',
    NOTIFY_RETRY_JITTER: '0',
    NOTIFY_MAX_ATTEMPTS: '5',
    NOTIFY_TIMEOUT_MS: String(TIMEOUT_MS),
    WORKER_LEASE_MS: String(LEASE_MS),
    WORKER_IDLE_RECHECK_MS: '200',
    NOTIFY_RELAY_INTERVAL_SECONDS: '3600',
    APPOINTMENT_RECONCILE_INTERVAL_SECONDS: '3600',
  });
}, 60_000);
afterAll(async () => {
  await stopTestService(svc, tdb);
  await hook?.close();
});

const notifications = () => svc.module('notifications');
const calls = (id: string) => hook.calls.filter((c) => c.body.id === id);
const row = (id: string) => tdb.db.notification.findUniqueOrThrow({ where: { id } });
const deadOrGone = async (id: string) => ['dead', undefined].includes((await notifications().queue.get(deliverJobId(id)))?.state);

/** After the refusal: FAILED, its job dead, the receiver called once; an operator's redrive then calls it once more. */
async function refusedOnceThenRedriven(id: string): Promise<void> {
  expect(await waitFor(async () => (await row(id)).status === 'FAILED' && (await deadOrGone(id)), 15_000, 50)).toBe(true);
  // Long enough for any delivery that came back to have called (the busy hand-back waits out the call's timeout and margin).
  await new Promise((r) => setTimeout(r, TIMEOUT_MS + 2_000));
  expect(calls(id).map((c) => c.answer)).toEqual(['reject']);
  expect(await row(id)).toMatchObject({ status: 'FAILED', redriveRequested: false });
  expect(await redriveOne(notifications().queue, notifications().redrives, deliverJobId(id))).toBe(true);
  expect(await waitFor(async () => (await row(id)).status === 'SENT', 10_000, 50)).toBe(true);
  expect(calls(id).map((c) => c.answer)).toEqual(['reject', 'ok']);
  expect((await row(id)).redriveRequested).toBe(false);
}

/**
 * Books a slot whose reminder is due at once; the receiver answers that
 * reminder's first call with `first` and every other call ok. Returns the
 * appointment, its slot, a move to another slot and back, and the reminder's
 * id once its first call has come.
 */
async function reminderAnswered(first: Answer) {
  const a = slot(120);
  const booked = await svc
    .api()
    .post('/appointments')
    .send(appointmentBody({ startsAt: a, remindBeforeSeconds: 86_400 }));
  expect(booked.status).toBe(201);
  let n = '';
  hook.setBehaviour((_, body) => {
    const startsAt = (body as unknown as { payload?: { startsAt?: string } }).payload?.startsAt;
    if (!n && startsAt === a) n = body.id;
    return body.id === n && calls(n).length === 1 ? first : 'ok';
  });
  expect(await waitFor(() => n !== '' && calls(n).length === 1, 5_000, 5)).toBe(true);
  const moveTo = async (startsAt: string) => expect((await svc.api().patch(`/appointments/${booked.body.id}`).send({ startsAt })).status).toBe(200);
  return { reminder: n, away: () => moveTo(slot(240)), back: () => moveTo(a) };
}

describe('a refused notification', () => {
  it('is not called again when Redis loses the claim during the refused call (the busy hand-back refunds attempt 1 to a later due time)', async () => {
    const id = randomUUID();
    await tdb.db.notification.create({ data: { id, kind: 'ORDER_CANCELLED', dedupeKey: `redrive:${id}`, payload: {} } });
    hook.setBehaviour((_, b) => (b.id === id && calls(id).length === 1 ? { slowMs: SLOW_MS, then: 'reject' } : 'ok'));
    const [s] = await scheduleDeliveries(notifications().queue, [id]);
    expect(await waitFor(() => calls(id).length === 1, 5_000, 5)).toBe(true);
    // Redis restarts without its last second: the job is as before its claim (pending, attempt 0, due when it was).
    await notifications().queue.schedule({ id: deliverJobId(id), type: DELIVER_JOB, at: s!.dueAt, payload: { notificationId: id }, mode: 'upsert' });
    await refusedOnceThenRedriven(id);
  }, 40_000);

  it('is not called again when its reminder is taken back (slot left and held again) during the refused call', async () => {
    const { reminder: n, away, back } = await reminderAnswered({ slowMs: SLOW_MS, then: 'reject' });
    await away();
    await back();
    await refusedOnceThenRedriven(n);
  }, 40_000);
});

const q = () => notifications().queue;
const before = () => notifications().redrives;
const dead = async (id: string) => (await q().get(deliverJobId(id)))?.state === 'dead';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** A fault stand-in at the queue's API: some calls of the real queue delayed or failing as Redis would make them. */
function wrap(base: Queue, over: Partial<Record<keyof Queue, unknown>>): Queue {
  return new Proxy(base, {
    get(t, p) {
      if (p in over) return (over as Record<string | symbol, unknown>)[p];
      const v = Reflect.get(t, p) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(t) : v;
    },
  });
}
async function refusedAndDead(answers: Answer[]) {
  const id = randomUUID();
  await tdb.db.notification.create({ data: { id, kind: 'ORDER_CANCELLED', dedupeKey: `rv:${id}`, payload: {} } });
  hook.setBehaviour((_, b) => (b.id === id ? (answers[calls(id).length - 1] ?? 'ok') : 'ok'));
  const [s] = await scheduleDeliveries(q(), [id]);
  expect(await waitFor(async () => (await row(id)).status === 'FAILED' && (await dead(id)), 15_000, 50)).toBe(true);
  return { id, dueAt: s!.dueAt };
}

describe("an operator's redrive, recorded in PostgreSQL (second review, 2026-11-25)", () => {
  it('a second redrive that finds the job no longer dead undoes its record, and a refusal outranks a redrive asked during its call', async () => {
    const { id, dueAt } = await refusedAndDead(['reject', { slowMs: 1_500, then: 'reject' }, 'ok']);
    let release!: () => void;
    const gateB = new Promise<void>((r) => (release = r));
    // Operator B: reads the job dead, then (network/GC delay) records and redrives.
    const slowGet = wrap(q(), {
      get: async (jid: string) => {
        const j = await q().get(jid);
        await gateB;
        return j;
      },
    });
    const b = redriveOne(slowGet, before(), deliverJobId(id));
    await sleep(100);
    expect(await redriveOne(q(), before(), deliverJobId(id))).toBe(true); // operator A
    expect(await waitFor(() => calls(id).length === 2, 5_000, 5)).toBe(true); // the redriven call runs (row SENDING)
    release();
    expect(await b).toBe(false); // B: 404 "no dead job"
    expect(await waitFor(async () => (await row(id)).status === 'FAILED' && (await dead(id)), 15_000, 50)).toBe(true);
    expect((await row(id)).redriveRequested).toBe(false);
    // The delivery that failed it comes back by itself (Redis loses its last writes; same stand-in as notifications.redrive.test.ts).
    await q().schedule({ id: deliverJobId(id), type: DELIVER_JOB, at: dueAt, payload: { notificationId: id }, mode: 'upsert' });
    await sleep(TIMEOUT_MS + 2_000);
    expect(calls(id).map((c) => c.answer)).toEqual(['reject', 'reject']);
  }, 40_000);

  it('a redrive whose Redis call fails undoes its record: the job coming back by itself later does not call the refused row', async () => {
    const { id, dueAt } = await refusedAndDead(['reject', 'ok']);
    const down = wrap(q(), {
      redrive: async () => {
        throw new Error('REDIS_UNAVAILABLE');
      },
    });
    await expect(redriveOne(down, before(), deliverJobId(id))).rejects.toThrow();
    await q().deleteDead(deliverJobId(id)); // operator gives up on it
    await q().schedule({ id: deliverJobId(id), type: DELIVER_JOB, at: dueAt, payload: { notificationId: id }, mode: 'upsert' });
    await sleep(3_000);
    expect(calls(id).map((c) => c.answer)).toEqual(['reject']);
  }, 40_000);

  it("the relay does not give up a row an operator's redrive has claimed since the relay found its job dead", async () => {
    const id = randomUUID();
    await tdb.db.notification.create({ data: { id, kind: 'ORDER_CANCELLED', dedupeKey: `rv:${id}`, payload: {}, status: 'FAILED' } });
    hook.setBehaviour((_, b) => (b.id === id ? (calls(id).length === 1 ? { slowMs: 800, then: 'fail' } : 'ok') : 'ok'));
    await scheduleDeliveries(q(), [id]);
    expect(await waitFor(() => dead(id), 10_000, 50)).toBe(true);
    // The state of a job dead-lettered while the database was down: row PENDING.
    await tdb.db.$executeRawUnsafe(`UPDATE notifications SET status='PENDING', created_at = now() - interval '1 minute' WHERE id = $1::uuid`, id);
    const repo = createNotificationsRepository(tdb.db as never);
    const page = await repo.listUnsettled(5, 60, null, 1000);
    const mine = page.filter((x) => x.id === id).map((x) => x.id);
    const r = await scheduleDeliveries(q(), mine); // relay: nx, finds it dead
    expect(r[0]!.status).toBe('dead');
    expect(await redriveOne(q(), before(), deliverJobId(id))).toBe(true); // operator
    expect(await waitFor(async () => (await row(id)).status === 'SENDING', 5_000, 5)).toBe(true);
    expect(await createDeliveries(tdb.db as never).markAbandoned(mine, 60)).toBe(0); // the relay goes on: the row is the redriven delivery's now
    // The redriven delivery keeps its retries: its first call fails, the next is taken.
    expect(await waitFor(async () => (await row(id)).status === 'SENT', 15_000, 50)).toBe(true);
    expect(calls(id).map((c) => c.answer)).toEqual(['fail', 'ok']);
  }, 40_000);

  it('a refused reminder withdrawn (slot left) stays FAILED, and taking the slot back does not call it again', async () => {
    const { reminder: n, away, back } = await reminderAnswered('reject');
    expect(await waitFor(async () => (await row(n)).status === 'FAILED' && (await dead(n)), 10_000, 20)).toBe(true);
    await away();
    expect((await row(n)).status).toBe('FAILED');
    await back();
    await sleep(3_000);
    expect(calls(n).map((c) => c.answer)).toEqual(['reject']);
    expect((await row(n)).status).toBe('FAILED');
  }, 40_000);

  it('a reminder refused during a call made after its slot was left (CANCELLED) comes back FAILED, uncalled, when the slot is held again', async () => {
    const { reminder: n, away, back } = await reminderAnswered({ slowMs: 1_000, then: 'reject' });
    await away();
    expect(await waitFor(async () => (await row(n)).status === 'CANCELLED', 5_000, 20)).toBe(true);
    expect((await row(n)).refused).toBe(true);
    await back();
    expect(await waitFor(async () => (await row(n)).status === 'FAILED', 5_000, 20)).toBe(true);
    await sleep(2_000);
    expect(calls(n).map((c) => c.answer)).toEqual(['reject']);
    expect((await row(n)).status).toBe('FAILED');
  }, 40_000);
});
