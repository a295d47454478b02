// The appointments model suite's moving and cancelling steps, each by the
// appointment's own client: moves to a new slot or back to an earlier one,
// cancels, and a move raced against a cancel, each answer applied to the
// model's slots (applyMove, applyCancel).
import type { Reply } from '../../chaos/drivers/http.js';
import type { Real } from '../runner.js';
import { OnAppt } from './book.steps.js';
import { type Appt, MIN_AHEAD_MS, type Model, close, fail, open, startAt } from './model.js';

/** The slot a move goes to: a new one, or back to one the appointment held before (if still ahead). */
function target(a: Appt, back: number | null, offsetMs: number): string {
  if (back !== null) {
    const earlier = [...a.slots.keys()].filter((s) => s !== a.current && Date.parse(s) > Date.now() + MIN_AHEAD_MS + 600);
    if (earlier.length) return earlier[back % earlier.length] as string;
  }
  return startAt(a.leadMs, offsetMs);
}

export function applyMove(a: Appt, to: string, res: Reply): void {
  if (res.status === 200) {
    if (a.cancelled) fail(`move of ${a.id} after its cancel was answered`, res);
    if (res.body.startsAt !== to) fail(`move of ${a.id} to ${to}`, res);
    if (to !== a.current) {
      close(a, res.firstSentAt, res.receivedAt);
      open(a, to, res.firstSentAt, Date.parse(String(res.body.remindAt)));
    }
    return;
  }
  if (res.status === 409 && res.body.code === 'APPOINTMENT_CANCELLED') {
    if (!a.cancelled) fail(`move of ${a.id}: refused as cancelled, never cancelled`, res);
    return;
  }
  // Retried after a 503 until the start had passed: an earlier attempt may have moved it (clarified reads which).
  if (res.status === 422 && res.body.code === 'STARTS_AT_IN_PAST' && res.attempts > 1)
    throw new Error(`move of ${a.id} retried past its start: unclear (read it back with clarified)`);
  fail(`move of ${a.id}`, res);
}

/**
 * A move retried after 503s until its start had passed is refused as past,
 * yet an earlier attempt may have committed it (each attempt had ended when
 * its answer came): the appointment as read now says which. The move's answer
 * as if given by the attempt that committed (its remind time as read), or null
 * when none did; any other answer as it came.
 */
export async function clarified(r: Real, a: Appt, to: string, res: Reply): Promise<Reply | null> {
  if (!(res.status === 422 && res.body.code === 'STARTS_AT_IN_PAST' && res.attempts > 1)) return res;
  const now = await r.world.httpAs(a.client).send('GET', `/appointments/${a.id}`);
  if (now.status !== 200) fail(`get ${a.id} after a move to ${to} retried past its start`, now);
  return now.body.startsAt === to && to !== a.current ? { ...res, status: 200, body: now.body } : null;
}

export function applyCancel(a: Appt, res: Reply): void {
  if (res.status !== 200 || res.body.status !== 'CANCELLED') fail(`cancel of ${a.id}`, res);
  if (!a.cancelled) close(a, res.firstSentAt, res.receivedAt);
  a.cancelled = true;
}

export class Move extends OnAppt {
  constructor(
    pick: number,
    readonly back: number | null,
    readonly offsetMs: number,
  ) {
    super(pick);
  }
  async act(m: Model, r: Real) {
    const a = this.appt(m);
    const to = target(a, this.back, this.offsetMs);
    const res = await clarified(r, a, to, await r.world.httpAs(a.client).send('PATCH', `/appointments/${a.id}`, { startsAt: to }));
    if (res) applyMove(a, to, res);
  }
  toString() {
    return this.back === null ? `Move(${this.pick}, remind in ${this.offsetMs} ms)` : `MoveBack(${this.pick}, ${this.back})`;
  }
}

export class Cancel extends OnAppt {
  async act(m: Model, r: Real) {
    const a = this.appt(m);
    applyCancel(a, await r.world.httpAs(a.client).send('POST', `/appointments/${a.id}/cancel`));
  }
  toString() {
    return `Cancel(${this.pick})`;
  }
}

/** A move and a cancel sent together. */
export class MoveAndCancel extends OnAppt {
  constructor(
    pick: number,
    readonly offsetMs: number,
  ) {
    super(pick);
  }
  async act(m: Model, r: Real) {
    const a = this.appt(m);
    const to = target(a, null, this.offsetMs);
    const [move, cancel] = await Promise.all([
      r.world.httpAs(a.client).send('PATCH', `/appointments/${a.id}`, { startsAt: to }),
      r.world.httpAs(a.client).send('POST', `/appointments/${a.id}/cancel`),
    ]);
    if (move.status === 200 && !a.cancelled) {
      // Moved, then cancelled (the order of the two is all it can be): the new
      // slot was held from the move at most until the cancel's answer.
      close(a, move.firstSentAt, move.receivedAt);
      open(a, to, move.firstSentAt, Date.parse(String(move.body.remindAt)));
      const h = a.slots.get(to)!.at(-1)!;
      h.untilLow = move.firstSentAt;
      h.untilHigh = cancel.receivedAt;
      if (cancel.status !== 200) fail(`cancel of ${a.id}`, cancel);
      a.cancelled = true;
      return;
    }
    applyCancel(a, cancel);
    if (move.status !== 409 && move.status !== 200) fail(`move of ${a.id} raced with its cancel`, move);
  }
  toString() {
    return `MoveAndCancel(${this.pick}, remind in ${this.offsetMs} ms)`;
  }
}
