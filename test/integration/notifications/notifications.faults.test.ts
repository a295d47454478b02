// Notification delivery through the faults of the adversarial review of
// 2026-11-23 (R1-R8), each ending as the record promises:
// - a write after the receiver answered rides out a database hiccup: a row
//   the receiver took ends SENT and is not sent again, on a job's last
//   attempt too; a SENT mark lost for longer replaces the job by one that
//   only records SENT, neither dead nor calling again, even if the reminder is
//   withdrawn meanwhile (R1, R6);
// - a withdrawn row is never claimed again: a cancel during a failing call
//   whose failure record was lost ends the row CANCELLED, and so does the
//   relay once its job is dead, so a redrive sends nothing (R5, R2);
// - a reminder taken back after its delivery job died is delivered (R3);
// - a SENDING row whose call is still running is left to it: one call (R4);
// - a 200 whose body comes slowly counts as sent, once (R7);
// - a FAILED row is called again only by a redrive, not by the delivery that
//   failed it come back after its dead-lettering was lost (a soak's counterexample);
// - the lease is renewed before the claim, so a cancel committed while it is
//   renewed stops the call (R8).
import { redriveOne } from '../../../src/modules/admin/redrive.js';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ServiceModule } from '../../../src/core/module.js';
import { dedupeKey } from '../../../src/core/delivery/index.js';
import { DELIVER_JOB, deliverJobId, scheduleDeliveries } from '../../../src/modules/notifications/notifications.jobs.js';
import type { JobInfo } from '../../../src/queue/producer/queue.js';
import type { Job, JobHandler } from '../../../src/queue/types.js';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { failNotificationWrites } from '../../helpers/db-faults.js';
import { gate } from '../../helpers/queues.js';
import { waitFor } from '../../helpers/redis.js';
import { startTestService, stopTestService, type TestService } from '../../helpers/service.js';
import { startWebhook, type Webhook } from '../../helpers/webhook.js';

const LEASE_MS = 1_000;
const TIMEOUT_MS = LEASE_MS / 2;

/** A slot whose remind time has come: `minutes` ahead, reminded a day before. */
const slot = (minutes: number) => new Date(Math.ceil(Date.now() / 60_000) * 60_000 + minutes * 60_000).toISOString();

/** A service of its own, its jobs given `maxAttempts` deliveries, with a webhook stand-in: one per describe block. */
function deliveryWorld(tag: string, maxAttempts: number) {
  let tdb: TestDb;
  let svc: TestService;
  let hook: Webhook;
  beforeAll(async () => {
    tdb = await createTestDb(tag);
    hook = await startWebhook();
    svc = await startTestService(tdb.url, {
      NOTIFY_WEBHOOK_URL: hook.url,
      NOTIFY_RETRY_DELAYS_MS: '200',
      NOTIFY_RETRY_JITTER: '0',
      NOTIFY_MAX_ATTEMPTS: String(maxAttempts),
      NOTIFY_TIMEOUT_MS: String(TIMEOUT_MS),
      WORKER_LEASE_MS: String(LEASE_MS),
      WORKER_IDLE_RECHECK_MS: '200',
      NOTIFY_RELAY_INTERVAL_SECONDS: '3600',
      APPOINTMENT_RECONCILE_INTERVAL_SECONDS: '3600',
      APPOINTMENT_RECONCILE_GRACE_SECONDS: '0',
    });
  });
  afterAll(async () => {
    await stopTestService(svc, tdb);
    await hook?.close();
  });

  const notifications = () => svc.module('notifications') as ServiceModule;
  const row = (id: string) => tdb.db.notification.findUniqueOrThrow({ where: { id } });
  const callsTo = (id: string) => hook.calls.filter((c) => c.body.id === id).length;
  const deliveredTo = (id: string) => hook.delivered.filter((c) => c.body.id === id);

  return {
    get db() {
      return tdb.db;
    },
    get hook() {
      return hook;
    },
    notifications,
    row,
    callsTo,
    deliveredTo,
    /** True once the receiver has been called with row `id`. */
    waitForCall: (id: string) => waitFor(() => callsTo(id) > 0, 5_000, 5),

    /** An order notification row, committed but not yet handed to delivery. */
    async orderNotification(label: string): Promise<string> {
      const id = randomUUID();
      await tdb.db.notification.create({ data: { id, kind: 'ORDER_CANCELLED', dedupeKey: `faults-${label}:${id}`, payload: {} } });
      return id;
    },

    /** Books an appointment for `${label}@example.com` (the reminder's recipient). */
    async book(label: string, startsAt: string, remindBeforeSeconds = 86_400): Promise<string> {
      const res = await svc
        .api()
        .post('/appointments')
        .send({ customerId: label, contact: `${label}@example.com`, channel: 'email', startsAt, remindBeforeSeconds });
      expect(res.status).toBe(201);
      return res.body.id as string;
    },

    async move(id: string, startsAt: string): Promise<void> {
      expect((await svc.api().patch(`/appointments/${id}`).send({ startsAt })).status).toBe(200);
    },

    async cancel(id: string): Promise<void> {
      expect((await svc.api().post(`/appointments/${id}/cancel`)).status).toBe(200);
    },

    /** The reminder row of one slot, once written. */
    async reminderOf(appointmentId: string, startsAt: string): Promise<string> {
      let id = '';
      const found = await waitFor(
        async () => {
          const rows = await tdb.db.notification.findMany({ where: { appointmentId, kind: 'APPOINTMENT_REMINDER' } });
          id = rows.find((n) => (n.payload as { startsAt: string }).startsAt === startsAt)?.id ?? '';
          return id !== '';
        },
        5_000,
        5,
      );
      expect(found, `reminder of ${appointmentId} for ${startsAt}`).toBe(true);
      return id;
    },

    /** The delivery job of a row once it is over: 'done' (acked, the row past PENDING) or 'dead'; its state if neither came within `timeoutMs`. */
    async jobOutcome(notificationId: string, timeoutMs: number): Promise<'done' | JobInfo['state']> {
      let state: 'done' | JobInfo['state'] = 'pending';
      await waitFor(
        async () => {
          const j = await notifications().queue.get(deliverJobId(notificationId));
          // No job yet for a row still PENDING: its delivery job is scheduled just after the row's commit.
          state = j !== null ? j.state : (await row(notificationId)).status === 'PENDING' ? 'pending' : 'done';
          return state === 'done' || state === 'dead';
        },
        timeoutMs,
        20,
      );
      return state;
    },

    /** True once the delivery of row `id` was replaced by one that only records SENT (its SENT mark kept in the job). */
    waitForKeptMark: (id: string) =>
      waitFor(
        async () => ((await notifications().queue.get(deliverJobId(id)))?.payload as { delivered?: boolean } | undefined)?.delivered === true,
        10_000,
        20,
      ),

    /** Row `id` ends SENT after one call, taken once by the receiver, its job done. */
    async expectSentOnce(id: string): Promise<void> {
      expect(await this.jobOutcome(id, 15_000)).toBe('done');
      expect(await row(id)).toMatchObject({ status: 'SENT', attempts: 1 });
      expect(deliveredTo(id)).toHaveLength(1);
      expect(callsTo(id)).toBe(1);
    },

    async runRelay(): Promise<void> {
      const relay = notifications().periodic.find((p) => p.id === 'notifications:relay');
      await relay!.run({ occurrence: Date.now(), signal: new AbortController().signal });
    },
  };
}

/** The delivery job of row `id` as the engine hands it to the handler (attempt 1 of 5, due now, unless told). */
function deliveryJob(queue: string, id: string, over: Partial<Job> = {}): Job {
  const base: Job = {
    queue,
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
  return { ...base, ...over };
}

describe('with attempts left', () => {
  const w = deliveryWorld('faults_retry', 5);

  it('records SENT through a database hiccup after the receiver took it, and does not send it again (R6)', async () => {
    w.hook.setBehaviour(() => 'ok');
    const id = await w.orderNotification('r6');
    // Three SENT marks in a row fail: more than a few hundred ms of database trouble.
    const fault = await failNotificationWrites(w.db, { write: 'sent', of: { id }, times: 3 });
    try {
      await scheduleDeliveries(w.notifications().queue, [id]);
      expect(await w.jobOutcome(id, 5_000)).toBe('done');
      expect(await fault.failures()).toBe(3);
      expect(await w.row(id)).toMatchObject({ status: 'SENT', attempts: 1 });
      expect(w.callsTo(id)).toBe(1);
      expect(w.deliveredTo(id)).toHaveLength(1);
    } finally {
      await fault.heal();
    }
  });

  it('never claims a withdrawn row: a cancel during a failing call whose failure record was lost ends it CANCELLED, unsent (R5)', async () => {
    // The first call is refused (503) after 300 ms; a later one would be taken.
    w.hook.setBehaviour((_, body) => (w.callsTo(body.id) === 1 ? { slowMs: 300, then: 'fail' } : 'ok'));
    const a = slot(60);
    // The database drops this reminder's failure records until healed.
    const fault = await failNotificationWrites(w.db, { write: 'failure', of: { recipient: 'r5@example.com' } });
    try {
      const id = await w.book('r5', a);
      const n = await w.reminderOf(id, a);
      expect(await w.waitForCall(n)).toBe(true);
      await w.cancel(id);
      // The delivery gave up recording the failure: its job is to be tried again. Then the database is back.
      const q = w.notifications().queue;
      expect(await waitFor(async () => ((await q.get(deliverJobId(n)))?.lastError ?? null) !== null, 5_000, 20)).toBe(true);
      await fault.heal();
      expect(await fault.failures()).toBeGreaterThan(0);
      // The retry waits until no call of the row can still be running, then ends it.
      expect(await w.jobOutcome(n, 15_000)).toBe('done');
      const r = await w.row(n);
      expect(r.status).toBe('CANCELLED');
      expect(r.lastError).toMatch(/withdrawn/);
      expect(w.callsTo(n)).toBe(1);
      expect(w.deliveredTo(n)).toHaveLength(0);
    } finally {
      await fault.heal();
    }
  });

  it('leaves a SENDING row to the call still running: a second delivery of its job does not call again (R4)', async () => {
    w.hook.setBehaviour(() => ({ slowMs: 400, then: 'ok' }));
    const id = await w.orderNotification('r4');
    const q = w.notifications().queue;
    await scheduleDeliveries(q, [id]);
    expect(await w.waitForCall(id)).toBe(true);
    // What a Redis failover losing the claim does: the job is due again while its call runs.
    await q.schedule({ id: deliverJobId(id), type: DELIVER_JOB, delayMs: 0, payload: { notificationId: id }, mode: 'upsert' });
    expect((await w.row(id)).status).toBe('SENDING');
    // The second delivery waits out the running call's time, then finds the row SENT.
    expect(await w.jobOutcome(id, 15_000)).toBe('done');
    expect((await w.row(id)).status).toBe('SENT');
    expect(w.callsTo(id)).toBe(1);
    expect(w.deliveredTo(id)).toHaveLength(1);
  });

  it('counts a 200 whose body comes slowly as sent, with one call (R7)', async () => {
    // The status comes at once; the body ends only after twice the call's timeout.
    w.hook.setBehaviour(() => ({ slowBodyMs: 2 * TIMEOUT_MS }));
    const id = await w.orderNotification('r7');
    await scheduleDeliveries(w.notifications().queue, [id]);
    expect(await w.jobOutcome(id, 5_000)).toBe('done');
    expect(await w.row(id)).toMatchObject({ status: 'SENT', attempts: 1, lastError: null });
    expect(w.callsTo(id)).toBe(1);
  });

  it('renews the lease before the claim: a cancel committed while it is renewed stops the call (R8)', async () => {
    w.hook.setBehaviour(() => 'ok');
    // A slot days ahead, reminded a minute before: its own reminder job stays away;
    // its reminder row is written here and its delivery run by hand, holding the lease renewal.
    const startsAt = slot(3 * 24 * 60);
    const id = await w.book('r8', startsAt, 60);
    const n = randomUUID();
    await w.db.notification.create({
      data: {
        id: n,
        kind: 'APPOINTMENT_REMINDER',
        dedupeKey: dedupeKey.appointmentReminder(id, Date.parse(startsAt)),
        appointmentId: id,
        channel: 'EMAIL',
        recipient: 'r8@example.com',
        payload: { appointmentId: id, customerId: 'r8', startsAt },
      },
    });
    const renewing = gate();
    const renewed = gate();
    const job = deliveryJob(w.notifications().queue.name, n);
    const delivery = (w.notifications().handlers[DELIVER_JOB] as JobHandler)(job, {
      signal: new AbortController().signal,
      leaseMs: LEASE_MS,
      now: Date.now,
      leaseLeftMs: () => 0, // the lease is renewed before the claim
      // A slow Redis: the renewal answers only when the test says.
      extendLease: async () => {
        renewing.open();
        await renewed.promise;
        return true;
      },
    });
    await renewing.promise;
    const duringRenewal = (await w.row(n)).status;
    await w.cancel(id);
    renewed.open();
    await delivery;
    expect(w.callsTo(n)).toBe(0);
    expect((await w.row(n)).status).toBe('CANCELLED');
    expect(duringRenewal).toBe('PENDING'); // not claimed before the lease was renewed
  });
});

describe('after a refusal', () => {
  const w = deliveryWorld('faults_refused', 5);

  /** Runs the delivery handler of row `id` by hand, as the engine would on attempt `attempts`. */
  const deliverAs = (id: string, attempts: number, dueAt = Date.now()) => {
    const job = deliveryJob(w.notifications().queue.name, id, { attempts, dueAt });
    return (w.notifications().handlers[DELIVER_JOB] as JobHandler)(job, {
      signal: new AbortController().signal,
      leaseMs: LEASE_MS,
      now: Date.now,
      leaseLeftMs: () => 0,
      extendLease: () => Promise.resolve(true),
    });
  };

  it('keeps a refusal the database would not take in its job: not called again once its call looks stale, FAILED and dead once recorded (soak counterexample)', async () => {
    w.hook.setBehaviour(() => 'reject');
    const id = await w.orderNotification('refusal-kept');
    const fault = await failNotificationWrites(w.db, { write: 'failure', of: { id } });
    try {
      const q = w.notifications().queue;
      await scheduleDeliveries(q, [id]);
      expect(await waitFor(async () => ((await q.get(deliverJobId(id)))?.payload as { refused?: string } | undefined)?.refused !== undefined, 10_000, 20)).toBe(
        true,
      );
      // Past the time its call would look stale (the call's timeout plus 5 s), still uncalled.
      await new Promise((r) => setTimeout(r, TIMEOUT_MS + 5_500));
      expect(w.callsTo(id)).toBe(1);
      expect(await w.row(id)).toMatchObject({ status: 'SENDING' });
      await fault.heal();
      expect(await w.jobOutcome(id, 15_000)).toBe('dead');
      expect(await w.row(id)).toMatchObject({ status: 'FAILED', refused: true, attempts: 1 });
      expect(w.callsTo(id)).toBe(1);
    } finally {
      await fault.heal();
    }
  });

  it('records nothing about a call its own worker cut off (shutdown), even on the last attempt: the row stays SENDING, not an untrue FAILED', async () => {
    w.hook.setBehaviour(() => ({ slowMs: 2_000, then: 'reject' }));
    const id = await w.orderNotification('cut-off');
    const stop = new AbortController();
    const job = deliveryJob(w.notifications().queue.name, id, { maxAttempts: 1, lastAttempt: true });
    const delivery = (w.notifications().handlers[DELIVER_JOB] as JobHandler)(job, {
      signal: stop.signal,
      leaseMs: LEASE_MS,
      now: Date.now,
      leaseLeftMs: () => 0,
      extendLease: () => Promise.resolve(true),
    });
    expect(await waitFor(() => w.callsTo(id) === 1, 5_000, 5)).toBe(true);
    stop.abort(new Error('shutdown grace period ended'));
    await expect(delivery).rejects.toThrow();
    expect(await w.row(id)).toMatchObject({ status: 'SENDING', attempts: 0, lastError: null });
  });

  it('does not call a FAILED row again from the delivery that failed it, come back because its dead-lettering was lost; a redrive does (soak counterexample)', async () => {
    w.hook.setBehaviour(() => 'reject');
    const id = await w.orderNotification('refused');
    const firstDue = Date.now();
    await scheduleDeliveries(w.notifications().queue, [id]);
    expect(await w.jobOutcome(id, 5_000)).toBe('dead');
    expect(await w.row(id)).toMatchObject({ status: 'FAILED', attempts: 1 });
    expect(w.callsTo(id)).toBe(1);
    // Redis hung or lost its last writes while the 400's nack went out: the
    // same delivery comes back on its next attempt and finds the row FAILED.
    w.hook.setBehaviour(() => 'ok');
    await expect(deliverAs(id, 2)).rejects.toThrow(/FAILED/);
    // Redis lost the claim as well (its last second of writes: the
    // notifications soak, four rows called again 1 s after their 400): the
    // job is back at attempt 1, but still due when it first was, before the
    // call that failed it. Not a redrive either.
    await expect(deliverAs(id, 1, firstDue)).rejects.toThrow(/FAILED/);
    // Attempt 1 due later than the call that failed it is no redrive either: a
    // busy hand-back refunds its attempt to a later due time, a reminder taken
    // back replaces its job (review of 2026-11-25; both reproduced end to end
    // in notifications.redrive.test.ts). Only the operator's redrive, recorded
    // in PostgreSQL, lets a FAILED row be called again.
    await expect(deliverAs(id, 1, Date.now() + 1_000)).rejects.toThrow(/FAILED/);
    expect(w.callsTo(id)).toBe(1);
    expect((await w.row(id)).status).toBe('FAILED');
    // An operator's redrive starts the delivery afresh (attempt 1): it calls.
    expect(await redriveOne(w.notifications().queue, w.notifications().redrives, deliverJobId(id))).toBe(true);
    expect(await w.jobOutcome(id, 5_000)).toBe('done');
    expect(await w.row(id)).toMatchObject({ status: 'SENT', attempts: 2 });
    expect(w.deliveredTo(id)).toHaveLength(1);
  });
});

describe("on a job's last attempt", () => {
  const w = deliveryWorld('faults_last', 1);

  it('records SENT through a database hiccup after the receiver took it: not FAILED, not sent again (R1)', async () => {
    w.hook.setBehaviour(() => 'ok');
    const id = await w.orderNotification('r1');
    const fault = await failNotificationWrites(w.db, { write: 'sent', of: { id }, times: 3 });
    try {
      await scheduleDeliveries(w.notifications().queue, [id]);
      expect(await w.jobOutcome(id, 5_000)).toBe('done');
      expect(await fault.failures()).toBe(3);
      expect(await w.row(id)).toMatchObject({ status: 'SENT', attempts: 1 });
      expect(w.deliveredTo(id)).toHaveLength(1);
    } finally {
      await fault.heal();
    }
  });

  it('keeps what it knows when its SENT mark fails past the retries: a job that only records SENT, not the dead set, and no second call (R1)', async () => {
    w.hook.setBehaviour(() => 'ok');
    const id = await w.orderNotification('r1-long');
    const fault = await failNotificationWrites(w.db, { write: 'sent', of: { id } });
    try {
      const q = w.notifications().queue;
      await scheduleDeliveries(q, [id]);
      // Replaced by a delivery that records SENT (or, the fault, dead).
      let job: JobInfo | null = null;
      const over = await waitFor(
        async () => {
          job = await q.get(deliverJobId(id));
          return job?.state === 'dead' || (job?.payload as { delivered?: boolean } | undefined)?.delivered === true;
        },
        10_000,
        20,
      );
      expect(over).toBe(true);
      expect(job).toMatchObject({ state: 'pending', attempts: 0, payload: { notificationId: id, delivered: true } });
      // Its own SENT mark fails too (6 tries of the call's delivery, then
      // its own; a try that shared its statement with other rows' marks
      // fails once with them and once alone, so the count may run ahead),
      // on this last attempt: handed back, not dead.
      const keptDue = (job as JobInfo | null)?.dueAt ?? 0;
      const handedBack = async () => {
        const j = await q.get(deliverJobId(id));
        // Ran (its mark failed) and came back later: due after the kept job was.
        const later = j?.state === 'pending' && (j.dueAt ?? 0) > keptDue && j.attempts === 0;
        return later && (j.payload as { delivered?: boolean }).delivered === true && (await fault.failures()) >= 7;
      };
      expect(await waitFor(handedBack, 15_000, 20)).toBe(true);
      await fault.heal(); // the database is back
      await w.expectSentOnce(id);
    } finally {
      await fault.heal();
    }
  });

  it('records SENT a reminder the receiver took while its slot was given up, its SENT mark lost meanwhile: not CANCELLED as of unknown outcome', async () => {
    w.hook.setBehaviour(() => ({ slowMs: 300, then: 'ok' }));
    const startsAt = slot(420);
    const fault = await failNotificationWrites(w.db, { write: 'sent', of: { recipient: 'sent-lost@example.com' } });
    try {
      const appt = await w.book('sent-lost', startsAt);
      const id = await w.reminderOf(appt, startsAt);
      await w.waitForCall(id);
      await w.cancel(appt); // withdrawn during the call
      expect(await w.waitForKeptMark(id)).toBe(true);
      await fault.heal();
      await w.expectSentOnce(id);
    } finally {
      await fault.heal();
    }
  });

  it('keeps the SENT mark waiting in its job when the slot is left and held again meanwhile: the receiver is not called again', async () => {
    w.hook.setBehaviour(() => ({ slowMs: 300, then: 'ok' }));
    const a = slot(480);
    const b = slot(540);
    const fault = await failNotificationWrites(w.db, { write: 'sent', of: { recipient: 'taken-back@example.com' } });
    try {
      const appt = await w.book('taken-back', a);
      const id = await w.reminderOf(appt, a);
      expect(await w.waitForKeptMark(id)).toBe(true);
      await w.move(appt, b); // withdraws the row (still SENDING)
      await w.move(appt, a); // held again: its withdrawal lifted by the remind job
      expect(await waitFor(async () => (await w.row(id)).withdrawnAt === null, 5_000, 20)).toBe(true);
      await fault.heal();
      await w.expectSentOnce(id);
    } finally {
      await fault.heal();
    }
  });

  it('ends a withdrawn row CANCELLED when its job died before recording the call, so a redrive sends nothing (R2)', async () => {
    w.hook.setBehaviour(() => ({ slowMs: 300, then: 'fail' }));
    const a = slot(60);
    const fault = await failNotificationWrites(w.db, { write: 'failure', of: { recipient: 'r2@example.com' } });
    try {
      const id = await w.book('r2', a);
      const n = await w.reminderOf(id, a);
      expect(await w.waitForCall(n)).toBe(true);
      await w.cancel(id);
      expect(await w.jobOutcome(n, 10_000)).toBe('dead');
      await fault.heal();
      expect((await w.row(n)).status).toBe('SENDING');
      // Its call long past, the relay finds the row left SENDING by a dead job.
      await w.db.$executeRawUnsafe(`UPDATE notifications SET sending_at = now() - interval '1 minute' WHERE id = $1::uuid`, n);
      await w.runRelay();
      expect((await w.row(n)).status).toBe('CANCELLED');
      // Later the receiver is well again and an operator redrives the dead deliveries.
      w.hook.setBehaviour(() => 'ok');
      expect(await redriveOne(w.notifications().queue, w.notifications().redrives, deliverJobId(n))).toBe(true);
      expect(await w.jobOutcome(n, 5_000)).toBe('done');
      expect((await w.row(n)).status).toBe('CANCELLED');
      expect(w.callsTo(n)).toBe(1);
      expect(w.deliveredTo(n)).toHaveLength(0);
    } finally {
      await fault.heal();
    }
  });

  it('delivers a reminder taken back after its delivery job died (R3)', async () => {
    w.hook.setBehaviour(() => 'fail');
    const a = slot(120);
    const b = slot(180);
    const id = await w.book('r3', a);
    const n = await w.reminderOf(id, a);
    expect(await w.jobOutcome(n, 5_000)).toBe('dead');
    expect((await w.row(n)).status).toBe('FAILED');
    await w.move(id, b);
    expect((await w.row(n)).status).toBe('CANCELLED');
    w.hook.setBehaviour(() => 'ok');
    await w.move(id, a);
    // Taken back from its first attempt, by a fresh delivery job.
    expect(await waitFor(async () => (await w.row(n)).status === 'SENT', 5_000, 20)).toBe(true);
    expect(w.deliveredTo(n)).toHaveLength(1);
    expect(w.callsTo(n)).toBe(2);
  });
});
