// The delivery room's guards, each at the one interleaving where it decides
// the outcome, driven step by step (a receiver the test answers when it says,
// delivery handlers run by hand, a take-back held open on its row lock), so
// each test passes or fails the same way on any machine:
// - a failed call is recorded only on the row its delivery claimed: a
//   delivery whose row was claimed again and delivered by a later one while
//   it was frozen leaves the SENT row alone (record-failure.ts);
// - a withdrawn row is ended only while still withdrawn: a slot held again
//   between the claim's look and the end keeps its reminder (cancel-withdrawn.ts);
// - a refused reminder taken back stays FAILED: holding the slot again does
//   not call it again (take-back.ts);
// - a withdrawn row is never claimed: neither a SENDING one whose worker died
//   mid-call nor a refused one an operator redrove is called for a slot given
//   up (claim.ts).
import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_CLIENT } from '../../../src/core/auth/api-key-input.js';
import type { Db } from '../../../src/core/db.js';
import { createDeliveries } from '../../../src/core/delivery/index.js';
import type { ServiceModule } from '../../../src/core/module.js';
import { redriveOne } from '../../../src/modules/admin/redrive.js';
import { createAppointmentsRepository } from '../../../src/modules/appointments/appointments.repository.js';
import { DELIVER_JOB, deliverJobId, scheduleDeliveries } from '../../../src/modules/notifications/notifications.jobs.js';
import type { Job, JobHandler } from '../../../src/queue/types.js';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { gate } from '../../helpers/queues.js';
import { waitFor } from '../../helpers/redis.js';
import { startTestService, stopTestService, type TestService } from '../../helpers/service.js';

// A call's timeout far beyond any step a test takes while a call is held (a
// call held past it would end as a timeout, not as the test answers it).
const TIMEOUT_MS = 20_000;
const LEASE_MS = 3 * TIMEOUT_MS;
/** Older than the call's timeout plus the delivery's margin (5 s): the claim takes such a SENDING row as a dead delivery's. */
const LONG_AGO = "interval '1 minute'";

/** What a call carries: the notification's id and payload. */
type Sent = { id: string; payload: Record<string, unknown> };

/**
 * A receiver the test answers: each call waits for what `answer` gives it (a
 * status code, or a promise of one the test settles); `nth` counts the calls
 * of its notification.
 */
type Receiver = {
  url: string;
  calls: { id: string; status?: number }[];
  answer: (id: string, nth: number, body: Sent) => number | Promise<number>;
  close(): Promise<void>;
};

async function startReceiver(): Promise<Receiver> {
  const r: Receiver = { url: '', calls: [], answer: () => 204, close: () => Promise.resolve() };
  const server: Server = createServer((req, res) => {
    let raw = '';
    req.on('data', (c) => (raw += c));
    req.on('end', () => {
      const body = JSON.parse(raw) as Sent;
      const call: { id: string; status?: number } = { id: body.id };
      r.calls.push(call);
      void Promise.resolve(r.answer(call.id, r.calls.filter((c) => c.id === call.id).length, body)).then((status) => {
        call.status = status;
        if (!res.destroyed) res.writeHead(status).end();
      });
    });
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  const addr = server.address();
  r.url = `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}/hook`;
  r.close = () =>
    new Promise((done) => {
      server.closeAllConnections();
      server.close(() => done());
    });
  return r;
}

/** An answer the test gives later: `arrived` once the call came, `give(status)` answers it. */
function held() {
  const came = gate();
  let give!: (status: number) => void;
  const status = new Promise<number>((r) => (give = r));
  return { arrived: came.promise, give, answer: () => (came.open(), status) };
}

let tdb: TestDb;
let svc: TestService;
let hook: Receiver;

beforeAll(async () => {
  tdb = await createTestDb('notify_guards');
  hook = await startReceiver();
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
  // The relay and the reconciliation pass run once at start: past that, they
  // stay away for an hour and leave the rows the tests write by hand alone.
  const ranOnce = async (module: string, id: string) => ((await svc.module(module).queue.get(id))?.dueAt ?? 0) > Date.now() + 60_000;
  expect(
    await waitFor(async () => (await ranOnce('notifications', 'notifications:relay')) && ranOnce('appointments', 'appointments:reconcile'), 20_000, 50),
  ).toBe(true);
}, 60_000);
afterAll(async () => {
  await stopTestService(svc, tdb);
  await hook?.close();
});

const notifications = () => svc.module('notifications') as ServiceModule;
const row = (id: string) => tdb.db.notification.findUniqueOrThrow({ where: { id } });
const callsTo = (id: string) => hook.calls.filter((c) => c.id === id).map((c) => c.status);
const repo = () => createAppointmentsRepository(tdb.db);
const deliveries = () => createDeliveries(tdb.db);
/** A slot `minutes` ahead, on the minute. */
const slot = (minutes: number) => new Date(Math.ceil(Date.now() / 60_000) * 60_000 + minutes * 60_000);

/** Row `id`'s delivery handler run by hand, as the engine hands it a job (attempt 1 of 5, its lease fresh). */
function deliver(id: string): Promise<unknown> {
  const job: Job = {
    queue: notifications().queue.name,
    shard: 0,
    id: deliverJobId(id),
    type: DELIVER_JOB,
    payload: { notificationId: id },
    attempts: 1,
    maxAttempts: 5,
    lastAttempt: false,
    dueAt: Date.now(),
    token: 1,
  };
  return Promise.resolve(
    (notifications().handlers[DELIVER_JOB] as JobHandler)(job, {
      signal: new AbortController().signal,
      leaseMs: LEASE_MS,
      now: Date.now,
      leaseLeftMs: () => LEASE_MS,
      extendLease: () => Promise.resolve(true),
    }),
  );
}

/**
 * An appointment booked for slot A whose remind time has come, and the
 * reminder its remind job wrote (the rest of that job, the dispatch, is the
 * test's).
 */
async function remindedAppointment(tag: string) {
  const a = slot(120);
  const booked = await repo().insert({
    id: randomUUID(),
    client: DEFAULT_CLIENT,
    customerId: tag,
    contact: `${tag}@example.com`,
    channel: 'EMAIL',
    startsAt: a,
    remindBeforeSeconds: 86_400,
    idempotencyKey: null,
    requestHash: null,
  });
  const id = booked!.id;
  const reminder = await repo().writeReminder(id, a.getTime());
  expect(reminder).toMatchObject({ fresh: true });
  return {
    id,
    reminder: reminder!.id,
    away: async () => expect(await repo().reschedule(DEFAULT_CLIENT, id, slot(240), null)).not.toBeNull(),
    back: async () => expect(await repo().reschedule(DEFAULT_CLIENT, id, a, null)).not.toBeNull(),
    /** The remind job of slot A: writes its reminder, or takes the withdrawn one back. */
    remind: (db: Db = tdb.db) => createAppointmentsRepository(db).writeReminder(id, a.getTime()),
  };
}

/**
 * A claimed reminder whose delivery's worker died during the call (nothing
 * recorded) and whose call's time is long past, then withdrawn by a move away.
 */
async function withdrawnAfterItsWorkerDied(tag: string) {
  const appt = await remindedAppointment(tag);
  expect(await deliveries().claim(appt.reminder, TIMEOUT_MS, { dueAt: new Date() })).toMatchObject({ kind: 'claimed' });
  await tdb.db.$executeRawUnsafe(`UPDATE notifications SET sending_at = now() - ${LONG_AGO} WHERE id = $1::uuid`, appt.reminder);
  await appt.away();
  expect(await row(appt.reminder)).toMatchObject({ status: 'SENDING', withdrawnAt: expect.any(Date) });
  return appt;
}

/** Statements of this database waiting for a lock, whose text contains `text`. */
async function waitingOnLock(text: string): Promise<number> {
  const [r] = await tdb.db.$queryRawUnsafe<{ n: number }[]>(
    `SELECT count(*)::int AS n FROM pg_stat_activity
      WHERE datname = current_database() AND wait_event_type = 'Lock' AND position($1 in query) > 0`,
    text,
  );
  return r?.n ?? 0;
}

describe('a failed call is recorded only on the row its delivery claimed', () => {
  it('leaves SENT a row that a later delivery claimed and delivered while the first was frozen, whatever the first call answers', async () => {
    const id = randomUUID();
    await tdb.db.notification.create({ data: { id, kind: 'ORDER_CANCELLED', dedupeKey: `guards-d1:${id}`, payload: {} } });
    const first = held();
    hook.answer = (n, nth) => (n === id && nth === 1 ? first.answer() : 204);
    // Delivery A claims the row and calls; its call is held at the receiver.
    const a = deliver(id);
    await first.arrived;
    // A's worker freezes (a VM pause, a long GC) for longer than any call
    // takes: its lease runs out and the job goes to another worker, which
    // finds the row SENDING for longer than a live call can be (the time
    // that passed is put on sending_at).
    await tdb.db.$executeRawUnsafe(`UPDATE notifications SET sending_at = now() - ${LONG_AGO} WHERE id = $1::uuid`, id);
    await scheduleDeliveries(notifications().queue, [id]);
    // Delivery B claims it again, the receiver takes B's call, the row is SENT.
    expect(await waitFor(async () => (await row(id)).status === 'SENT', 10_000, 20)).toBe(true);
    expect(await waitFor(async () => (await notifications().queue.get(deliverJobId(id))) === null, 10_000, 20)).toBe(true);
    // A thaws and its call fails: nothing of it is recorded on the SENT row.
    first.give(503);
    await expect(a).rejects.toThrow(/HTTP 503/);
    expect(await row(id)).toMatchObject({ status: 'SENT', attempts: 1, lastError: null });
    expect(callsTo(id)).toEqual([503, 204]);
  });
});

describe('a withdrawn row is ended only while still withdrawn', () => {
  it('leaves a reminder taken back between the claim that found it withdrawn and its end to that delivery, which then sends it', async () => {
    const appt = await withdrawnAfterItsWorkerDied('guards-d2');
    const n = appt.reminder;
    await appt.back();
    hook.answer = () => 204;
    // The remind job of slot A takes the reminder back in a transaction held
    // open: the withdrawal is lifted, not yet committed, the row locked.
    const taken = gate();
    const commit = gate();
    let takenBack: unknown = null;
    const takeBack = tdb.db.$transaction(
      async (tx) => {
        takenBack = await appt.remind(tx as unknown as Db);
        taken.open();
        await commit.promise;
      },
      { timeout: 60_000 },
    );
    await taken.promise;
    // The row's delivery job comes back: its claim sees the row withdrawn (the
    // take-back is not committed), and its end waits for the row's lock.
    const delivery = deliver(n);
    try {
      expect(await waitFor(async () => (await waitingOnLock("SET status = 'CANCELLED'")) > 0, 10_000, 10)).toBe(true);
    } finally {
      commit.open();
    }
    await takeBack;
    expect(takenBack).toEqual({ id: n, fresh: false }); // still SENDING: its delivery job is its own
    // The slot is held again: the row is not ended, the delivery looks again.
    expect(await delivery).toMatchObject({ retryInMs: expect.any(Number) });
    expect(await row(n)).toMatchObject({ status: 'SENDING', withdrawnAt: null });
    // Looking again, it finds the row its own (no call of it can still be running) and sends it.
    expect(await deliver(n)).toBeUndefined();
    expect(await row(n)).toMatchObject({ status: 'SENT', attempts: 1 });
    expect(callsTo(n)).toEqual([204]);
  });
});

describe('a refused reminder taken back stays FAILED', () => {
  it('is not called again when its slot, left during the refused call, is held again', async () => {
    const at = slot(360).toISOString();
    // Its reminder's first call is held until the test answers it.
    const first = held();
    hook.answer = (_, nth, body) => (body.payload.customerId === 'guards-d4' && body.payload.startsAt === at && nth === 1 ? first.answer() : 204);
    const booked = await svc
      .api()
      .post('/appointments')
      .send({ customerId: 'guards-d4', contact: 'guards-d4@example.com', channel: 'email', startsAt: at, remindBeforeSeconds: 86_400 });
    expect(booked.status).toBe(201);
    const id = booked.body.id as string;
    let n = '';
    // Its remind job writes the reminder and its delivery calls: held at the receiver.
    expect(
      await waitFor(
        async () => {
          n = (await tdb.db.notification.findFirst({ where: { appointmentId: id, kind: 'APPOINTMENT_REMINDER' } }))?.id ?? '';
          return n !== '';
        },
        10_000,
        5,
      ),
    ).toBe(true);
    await first.arrived;
    const move = async (startsAt: string) => expect((await svc.api().patch(`/appointments/${id}`).send({ startsAt })).status).toBe(200);
    // Left during the call: withdrawn, still SENDING; then the receiver refuses it.
    await move(slot(420).toISOString());
    first.give(400);
    expect(await waitFor(async () => (await row(n)).status === 'CANCELLED', 10_000, 20)).toBe(true);
    expect(await row(n)).toMatchObject({ refused: true, attempts: 1 });
    // Held again: the remind job takes the reminder back, FAILED as refused, and its fresh delivery job dies uncalled.
    await move(at);
    expect(await waitFor(async () => (await row(n)).withdrawnAt === null, 10_000, 20)).toBe(true);
    expect(await row(n)).toMatchObject({ status: 'FAILED', refused: true, attempts: 1 });
    expect(await waitFor(async () => (await notifications().queue.get(deliverJobId(n)))?.state === 'dead', 10_000, 20)).toBe(true);
    expect(await row(n)).toMatchObject({ status: 'FAILED', refused: true, attempts: 1 });
    expect(callsTo(n)).toEqual([400]);
  });
});

describe('a withdrawn row is never claimed', () => {
  it('ends CANCELLED, uncalled, a reminder whose worker died mid-call and whose slot was then left, when its delivery comes back', async () => {
    const { reminder: n } = await withdrawnAfterItsWorkerDied('guards-d6-stale');
    hook.answer = () => 204;
    expect(await deliver(n)).toBeUndefined();
    expect(await row(n)).toMatchObject({ status: 'CANCELLED', attempts: 0 });
    expect((await row(n)).lastError).toMatch(/outcome of a call interrupted before it was recorded is unknown/);
    expect(callsTo(n)).toEqual([]);
  });

  it('ends CANCELLED, uncalled, a refused reminder whose slot was left, when an operator redrives its dead job', async () => {
    const appt = await remindedAppointment('guards-d6-redrive');
    const n = appt.reminder;
    hook.answer = (call, nth) => (call === n && nth === 1 ? 400 : 204);
    // The remind job's dispatch: the receiver refuses the call, the row is FAILED and its job dead.
    await scheduleDeliveries(notifications().queue, [n]);
    const q = notifications().queue;
    expect(await waitFor(async () => (await q.get(deliverJobId(n)))?.state === 'dead', 10_000, 20)).toBe(true);
    expect(await row(n)).toMatchObject({ status: 'FAILED', refused: true });
    // The slot left: a refused row stays FAILED, marked withdrawn.
    await appt.away();
    expect(await row(n)).toMatchObject({ status: 'FAILED', withdrawnAt: expect.any(Date) });
    // An operator redrives the dead deliveries: this one ends the row, calling nobody.
    expect(await redriveOne(q, notifications().redrives, deliverJobId(n))).toBe(true);
    expect(await waitFor(async () => (await q.get(deliverJobId(n))) === null, 10_000, 20)).toBe(true);
    // The redrive is spent: nothing is left to deliver, so retention may take the row.
    expect(await row(n)).toMatchObject({ status: 'CANCELLED', redriveRequested: false });
    expect(callsTo(n)).toEqual([400]);
  });
});
