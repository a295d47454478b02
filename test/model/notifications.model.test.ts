// Model-based suite of notification delivery: notifications are made, by
// either of two clients, by customer cancellations of orders and by reminders
// due at once (their delivery jobs at priority 8 and the default 5,
// notification-priority.ts, so the queue's priority lanes are drawn too), while the receiver answers at random (ok, fails, slow within
// the timeout, slow past it, hangs, refuses as malformed) and faults strike;
// an operator redrives refused ones (one at a time, and one job twice at
// once), and runs a notification's delivery job now while its call runs (two
// deliveries of one row at once); the other client lists a subject's
// notifications; an operator pauses the queue (or its delivery type) and
// resumes it. The rules checked, against what the receiver logged:
// - each business event has exactly one notification, of its subject's
//   client (as the subject is); the other client lists none of them;
// - the record tells the truth: SENT exactly when the receiver took it
//   (answered a success the caller got), FAILED only when its last answer
//   refused it as malformed and it never went through;
// - a refused notification is not sent again until an operator redrives it
//   (unless a fault cut its worker off before the refusal was recorded);
// - a notification the receiver took is never sent again (unless a fault cut
//   a send off between the receiver's answer and the SENT mark);
// - nothing is delivered while paused (past a grace for deliveries already
//   running when the pause was answered, or a fault near the pause), and
//   everything is after the resume (every run ends resumed, then settles).
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deliverJobId } from '../../src/modules/notifications/notifications.jobs.js';
import {
  CancelOrder,
  type Event,
  ForeignList,
  type Model,
  PAUSE_GRACE_MS,
  PauseQueue,
  PausedBurst,
  Redrive,
  RedriveTwice,
  RemindNow,
  ResumeQueue,
  RunNowDuringCall,
  SlowBodyNotice,
  resumeOpenPause,
  subjectsOf,
} from './notifications/steps.js';
import { type Real, SETTLE_MS, type Step, cutOffBy, excuse, problems, receivers, repeatExplained, runSuite, settled } from './runner.js';
import { MODEL_ADMIN_TOKEN, MODEL_CLIENTS, type ModelClient, RECEIVER_KINDS, type World, startWorld } from './world.js';

let world: World;
beforeAll(async () => {
  world = await startWorld('notifications');
}, 120_000);
afterAll(async () => {
  await world?.close();
});

const client = fc.constantFrom<ModelClient>(...MODEL_CLIENTS);
const operations: fc.Arbitrary<Step<Model>> = fc.oneof(
  { weight: 3, arbitrary: client.map((c) => new CancelOrder(c)) },
  { weight: 3, arbitrary: client.map((c) => new RemindNow(c)) },
  { weight: 1, arbitrary: fc.nat().map((i) => new Redrive(i)) },
  // Aimed at what random steps seldom meet: two deliveries of one row at once,
  // a fast success with a slow body, two redrives at once.
  { weight: 1, arbitrary: client.map((c) => new RunNowDuringCall(c)) },
  { weight: 1, arbitrary: client.map((c) => new SlowBodyNotice(c)) },
  { weight: 1, arbitrary: fc.nat().map((i) => new RedriveTwice(i)) },
  // The other client's view of a subject: where a missing client filter would show its rows.
  { weight: 2, arbitrary: fc.nat().map((i) => new ForeignList(i)) },
  // An operator's pause (the whole queue, or only deliveries) and resume.
  { weight: 1, arbitrary: fc.boolean().map((whole) => new PauseQueue(whole)) },
  { weight: 1, arbitrary: fc.constant(new ResumeQueue()) },
  // Aimed at the rule: notifications made while paused, none delivered until the resume.
  { weight: 2, arbitrary: fc.tuple(fc.boolean(), client).map(([whole, c]) => new PausedBurst(whole, c)) },
  // The receiver's answers are this suite's subject: they change often.
  { weight: 3, arbitrary: receivers<Model>(RECEIVER_KINDS) },
);

/**
 * A fault this close before a pause (or during it) may delay a delivery
 * already running past the grace, or lose the pause with a Redis restart
 * until the pause check (every 5 s) re-applies it.
 */
const PAUSE_FAULT_SLACK_MS = 6_000;

async function settleAndCheck(m: Model, r: Real): Promise<Record<string, number>> {
  const db = r.world.db;
  // Every run ends resumed: what waited must then be delivered.
  await resumeOpenPause(m, r);
  const calm = await settled(async () => {
    const rows = await db.notification.findMany({ where: subjectsOf(m), select: { status: true } });
    return rows.length >= m.events.length && rows.every((n) => n.status === 'SENT' || n.status === 'FAILED');
  }, SETTLE_MS);
  const rows = await db.notification.findMany({ where: subjectsOf(m) });
  const p = problems();
  if (!calm) p.add(`not settled within ${SETTLE_MS} ms: ${JSON.stringify(rows.map((n) => n.status))}`);
  const counts = {
    notifications: rows.length,
    ofOtherClients: rows.filter((n) => n.client !== MODEL_CLIENTS[0]).length,
    sent: 0,
    failed: 0,
    refusals: 0,
    redriven: m.redrives.length,
    deliveredTwice: 0,
    pauses: m.pauses.length,
    callsWhilePaused: 0,
  };
  // Each subject's client, as its row records it.
  const subjects = new Map<string, string>();
  const ids = (kind: Event['kind']) => m.events.filter((e) => e.kind === kind).map((e) => e.subject);
  for (const o of await db.order.findMany({ where: { id: { in: ids('order') } }, select: { id: true, client: true } })) subjects.set(o.id, o.client);
  for (const a of await db.appointment.findMany({ where: { id: { in: ids('reminder') } }, select: { id: true, client: true } })) subjects.set(a.id, a.client);
  for (const e of m.events) {
    const mine = rows.filter((n) => (e.kind === 'order' ? n.orderId : n.appointmentId) === e.subject);
    if (mine.length !== 1) p.add(`${e.kind} ${e.subject}: ${mine.length} notifications`);
    const of = `${e.kind} ${e.subject} (of ${e.client})`;
    if (subjects.get(e.subject) !== e.client) p.add(`${of}: its row is ${String(subjects.get(e.subject))}'s`);
    for (const n of mine) if (n.client !== e.client) p.add(`${of}: notification ${n.id} is ${n.client}'s`);
  }
  for (const n of rows) {
    const calls = r.world.webhook.calls.filter((c) => c.body.id === n.id);
    const taken = r.world.webhook.delivered.filter((c) => c.body.id === n.id);
    const refused = calls.filter((c) => c.answer === 'reject');
    counts.refusals += refused.length;
    if (taken.length > 0) {
      counts.sent++;
      // Outside the contract: a receiver that took it, then refused the
      // repeat a cut-off send made (a receiver drops a repeat of an id it
      // has, docs/guarantees.md, "What does not hold"). The record follows the last
      // answer, FAILED (notifications soak, seed 283322293).
      const refusedRepeat = cutOffBy(r, taken[0]!) !== null && calls.some((c) => c.at > taken[0]!.at && c.answer === 'reject');
      if (n.status === 'FAILED' && refusedRepeat) excuse(r, 'repeat of a cut-off success refused', `notification ${n.id} FAILED after the receiver took it`);
      if (n.status !== 'SENT' && !(n.status === 'FAILED' && refusedRepeat)) p.add(`notification ${n.id}: the receiver took it, recorded ${n.status}`);
      // Nothing after the success but what a cut-off send explains.
      const first = taken[0]!.at;
      const after = calls.filter((c) => c.at > first).length;
      if (taken.length > 1 || after > 0) {
        counts.deliveredTwice++;
        if (!repeatExplained(r, n)) p.add(`notification ${n.id}: called ${after} times after the receiver took it`);
      }
    } else {
      counts.failed++;
      const last = calls.at(-1);
      if (n.status !== 'FAILED') p.add(`notification ${n.id}: never taken, recorded ${n.status}, last answer ${last?.answer ?? 'none'}`);
      else if (last?.answer !== 'reject' && !(await redriveLost(m, r, n.id))) {
        p.add(`notification ${n.id}: never taken, recorded FAILED, last answer ${last?.answer ?? 'none'}`);
      }
    }
    // A refusal is final until an operator redrives it, unless a fault cut
    // the worker off between the receiver's answer and its record (a worker
    // killed, its database connection terminated): then the outcome is
    // unknown and the call is made again, as after a success (found by the
    // notifications soak, 2026-11-24: a worker killed right after a 400).
    for (const refusal of refused) {
      const next = calls.find((c) => c.at > refusal.at);
      if (!next || m.redrives.some((d) => d.id === n.id && d.at >= refusal.at && d.at <= next.at)) continue;
      const cause = cutOffBy(r, refusal);
      if (cause) excuse(r, cause, `notification ${n.id} called again after a refusal`);
      else p.add(`notification ${n.id}: sent again ${next.at - refusal.at} ms after the receiver refused it, without a redrive`);
    }
  }
  counts.callsWhilePaused = callsWhilePaused(m, r, new Set(rows.map((n) => n.id)), p);
  p.throwIfAny(() => `run ${r.tag} (logs: ${r.world.saveLogs(r.tag)})`);
  return counts;
}

/** Receiver calls of the run's notifications made while the queue was paused, past the grace; each is a problem unless a fault explains it. */
function callsWhilePaused(m: Model, r: Real, ids: ReadonlySet<string>, p: ReturnType<typeof problems>): number {
  let n = 0;
  for (const pause of m.pauses) {
    const to = pause.to ?? Number.POSITIVE_INFINITY;
    for (const c of r.world.webhook.calls) {
      if (!ids.has(String(c.body.id)) || c.at <= pause.from + PAUSE_GRACE_MS || c.at >= to) continue;
      n++;
      const what = `notification ${String(c.body.id)} called ${c.at - pause.from} ms into a pause (${pause.whole ? 'queue' : 'deliveries'})`;
      const fault = r.run.faultSpans.find((f) => f.from <= c.at && f.to + PAUSE_FAULT_SLACK_MS >= pause.from);
      if (fault) excuse(r, `${fault.kind} near a pause`, what);
      else p.add(what);
    }
  }
  return n;
}

/**
 * A FAILED row after a call that was no refusal is true only as "given up,
 * in the dead set": an operator's redrive undone by Redis losing its last
 * writes (the relay finds the job dead again and the row not settled, so
 * FAILED; found by the notifications soak, seed 278229567). It must have been
 * redriven in a run where Redis restarted, and be redrivable: dead.
 */
async function redriveLost(m: Model, r: Real, id: string): Promise<boolean> {
  if (!r.run.faults.restartRedis || !m.redrives.some((d) => d.id === id)) return false;
  const job = await r.world.http.send('GET', `/admin/queues/notifications/jobs/${encodeURIComponent(deliverJobId(id))}`, undefined, {
    authorization: `Bearer ${MODEL_ADMIN_TOKEN}`,
  });
  return job.status === 200 && job.body.state === 'dead';
}

describe('notification delivery, model-based', () => {
  it('keeps the record true under random receiver answers, redrives and faults', async () => {
    const summary = await runSuite<Model>({
      name: 'notifications',
      world: () => world,
      operations,
      receiverKinds: RECEIVER_KINDS,
      newModel: () => ({ events: [], redrives: [], pauses: [] }),
      settleAndCheck,
      runs: 8,
      maxCommands: 40,
    });
    expect(summary.runs).toBeGreaterThan(0);
  });
});
