// The appointments model suite's aimed steps: moves that meet a reminder's
// call, which random moves seldom do (a call lasts a few hundred ms at most).
import type { ModelClient, ReceiverKind } from '../world.js';
import { type Real, Step, dbRead } from '../runner.js';
import { OnAppt, book } from './book.steps.js';
import { type Model, fail, startAt } from './model.js';
import { applyLead, leadFor } from './lead.step.js';
import { applyCancel, applyMove } from './move-cancel.steps.js';

/** The receiver while the reminder is called: a slow success, failures, a call that hangs to its timeout, or a refusal. */
export type CallReceiver = Extract<ReceiverKind, 'slowOk' | 'fail' | 'hang' | 'reject'>;
/** How long the step looks for the reminder's first call. */
const LOOK_MS = 2_000;
/** The booking's lead and start: its remind time has passed, its start is far enough ahead to come back to. */
const LEAD_S = 5;
const START_IN_MS = 4_000;

/**
 * What the appointment does while its reminder is called: moves away and
 * straight back, moves away, is cancelled, or changes only its lead (the slot
 * held still: its reminder is not withdrawn).
 */
export type Then = 'back' | 'away' | 'cancel' | 'lead';

/**
 * A booking due at once whose appointment is moved, cancelled or given a new
 * lead while the reminder's call runs (or after it failed): a lead change
 * keeps the slot and its reminder (one call, SENT if it went through); the
 * withdrawal must leave a running call to decide (SENT if it went through,
 * whatever the slot did meanwhile, and never a second call), and a move back
 * must take a withdrawn reminder back, or the held slot loses it (a refused
 * one stays refused). The receiver is set as a Receiver step would set it,
 * and stays so.
 */
export class DuringCall extends Step<Model> {
  constructor(
    readonly receiver: CallReceiver,
    readonly then: Then,
    readonly awayOffsetMs: number,
    readonly as: ModelClient,
    /**
     * How far ahead the slot starts (its reminder due at once all the same):
     * room for the first call to come, and for the move back, on a loaded
     * host. The longer the slot is ahead, the longer the step looks for the call.
     */
    readonly startInMs = START_IN_MS,
  ) {
    super();
  }
  async act(m: Model, r: Real) {
    r.world.receiver(this.receiver);
    const leadS = Math.max(LEAD_S, Math.ceil(this.startInMs / 1_000) + 1);
    const a = await book(m, r, this.as, leadS, this.startInMs - leadS * 1_000);
    if (!a) return;
    const home = a.current;
    const end = Date.now() + LOOK_MS * (this.startInMs / START_IN_MS);
    for (;;) {
      const n = await dbRead(() => r.world.db.notification.findFirst({ where: { appointmentId: a.id }, select: { status: true, attempts: true } }));
      if (n && (n.status === 'SENDING' || n.attempts > 0)) break;
      if (Date.now() > end) return;
      await new Promise((res) => setTimeout(res, 10));
    }
    if (this.then === 'cancel') return applyCancel(a, await r.world.httpAs(a.client).send('POST', `/appointments/${a.id}/cancel`));
    if (this.then === 'lead') {
      const lead = leadFor(a, this.awayOffsetMs);
      m.leads.duringCall++;
      return applyLead(m, a, lead, await r.world.httpAs(a.client).send('PATCH', `/appointments/${a.id}`, { remindBeforeSeconds: lead }));
    }
    const away = startAt(a.leadMs, this.awayOffsetMs);
    applyMove(a, away, await r.world.httpAs(a.client).send('PATCH', `/appointments/${a.id}`, { startsAt: away }));
    if (this.then === 'away') return;
    const back = await r.world.httpAs(a.client).send('PATCH', `/appointments/${a.id}`, { startsAt: home });
    if (back.status !== 200) fail(`move of ${a.id} back to ${home}`, back);
    applyMove(a, home, back);
  }
  toString() {
    const how = {
      back: `, away to remind in ${this.awayOffsetMs} ms`,
      away: `, away to remind in ${this.awayOffsetMs} ms`,
      cancel: '',
      lead: `, to remind in ${this.awayOffsetMs} ms`,
    };
    const room = this.startInMs === START_IN_MS ? '' : `, start in ${this.startInMs} ms`;
    return `DuringCall(${this.receiver}, ${this.then}${how[this.then]}, ${this.as}${room})`;
  }
}

/** Two moves of one appointment to different slots at once: whichever commits last holds, the other's slot is left at once. */
export class MoveTwice extends OnAppt {
  constructor(
    pick: number,
    readonly offsetsMs: readonly [number, number],
  ) {
    super(pick);
  }
  async act(m: Model, r: Real) {
    const a = this.appt(m);
    const to = this.offsetsMs.map((o) => startAt(a.leadMs, o));
    const answers = await Promise.all(to.map((startsAt) => r.world.httpAs(a.client).send('PATCH', `/appointments/${a.id}`, { startsAt })));
    if (answers.some((res) => res.status !== 200) || to[0] === to[1]) {
      // Refused only as cancelled, or one slot twice: each answer is judged as a move alone.
      answers.forEach((res, i) => applyMove(a, to[i] as string, res));
      return;
    }
    const now = await r.world.httpAs(a.client).send('GET', `/appointments/${a.id}`);
    const last = to.indexOf(String(now.body.startsAt));
    if (now.status !== 200 || last === -1) fail(`get ${a.id} after two moves at once to ${to.join(', ')}`, now);
    const first = 1 - last;
    // The first to commit held its slot from its commit to the last's: never long enough to be owed.
    applyMove(a, to[first] as string, answers[first]!);
    const h = a.slots.get(to[first] as string)!.at(-1)!;
    h.from = Math.min(answers[0]!.firstSentAt, answers[1]!.firstSentAt);
    h.untilLow = h.from;
    h.untilHigh = Math.max(answers[0]!.receivedAt, answers[1]!.receivedAt);
    applyMove(a, to[last] as string, answers[last]!);
  }
  toString() {
    return `MoveTwice(${this.pick}, remind in ${this.offsetsMs.join(' and ')} ms)`;
  }
}
