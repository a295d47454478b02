// The timers model suite's aimed step: a change or cancel sent while the
// timer's call runs (or between its attempts), which random steps seldom meet
// (a call lasts a few hundred ms at most).
import type { ModelClient, ReceiverKind } from '../world.js';
import { type Real, Step, dbRead } from '../runner.js';
import { cancel } from './read-cancel.steps.js';
import { put } from './put.steps.js';
import { type Model, current, find, freshKey } from './model.js';

/** The receiver while the timer is called: a slow success, one past the call's timeout, a call that hangs, failures, a refusal. */
export type CallReceiver = Extract<ReceiverKind, 'slowOk' | 'slowTimeout' | 'hang' | 'fail' | 'reject'>;
/** What the client sends once the call runs. */
export type Then = 'replace' | 'cancel' | 'debounce' | 'keep';
/** How long the step looks for the timer's first call. */
const LOOK_MS = 2_000;

/**
 * A timer due at once; once its firing is being delivered (or has been
 * tried), its client replaces it (409 TIMER_DELIVERING while the call runs:
 * nothing changes; 200 if it is pending again; 201 once done), cancels it
 * (409 while the call runs or once delivered: the call decides; 200 if
 * pending or failed: no call of it after), debounces it (a new burst while
 * the call runs) or keeps it (never changed). The receiver is set as a
 * Receiver step would set it, and stays so.
 */
export class DuringCall extends Step<Model> {
  constructor(
    readonly receiver: CallReceiver,
    readonly then: Then,
    readonly laterMs: number,
    readonly as: ModelClient,
  ) {
    super();
  }
  async act(m: Model, r: Real) {
    r.world.receiver(this.receiver);
    const key = freshKey(m, r, 'c');
    await put(m, r, this.as, key, { mode: 'replace', delayMs: 0, payload: { n: m.seq++ } });
    const id = current(find(m, this.as, key)!).id;
    const end = Date.now() + LOOK_MS;
    for (;;) {
      const n = await dbRead(() => r.world.db.notification.findUnique({ where: { id }, select: { status: true, attempts: true } }));
      if (n && (n.status === 'SENDING' || n.attempts > 0)) break;
      if (Date.now() > end) return;
      await new Promise((res) => setTimeout(res, 10));
    }
    m.counts.duringCall++;
    const payload = { n: m.seq++ };
    if (this.then === 'cancel') return cancel(m, r, this.as, key);
    if (this.then === 'replace') return put(m, r, this.as, key, { mode: 'replace', delayMs: this.laterMs, payload });
    if (this.then === 'keep') return put(m, r, this.as, key, { mode: 'keep', delayMs: this.laterMs, payload });
    return put(m, r, this.as, key, { mode: 'debounce', delayMs: this.laterMs, maxWaitMs: 2 * this.laterMs + 1, payload });
  }
  toString() {
    return `DuringCall(${this.receiver}, then ${this.then} in ${this.laterMs} ms, ${this.as})`;
  }
}
