// The rules one firing (a delivery row of a timer) is held to once settled,
// against its calls at the receiver (webhook-id: the row's id) and what the
// answers said of it (the model): never called before its fire time; the
// record true (DELIVERED exactly when the receiver took a call of its fire
// time); at most one delivery to effect, a repeat only after a success a
// fault cut off or one answered so slowly the service had given up; FAILED
// only after its attempts or a refusal; a moved-away fire time, a cancelled
// firing, a done one never called after the answer that said so, and one a
// later firing of its timer withdrew called at most by the call then running.
import { type Real, cutOffBy, excuse } from '../runner.js';
import { mayHaveTimedOut } from '../world.js';
import { type Firing, type Version, same, version } from './model.js';
import type { Call } from './settle-and-check.js';

/** A firing's delivery row, as the check reads it. */
export type Row = { id: string; timerId: string | null; status: string; attempts: number; payload: unknown; dueAt: Date | null; lastError: string | null };
type FiringPayload = { key: string; payload: unknown; fireAt: string; maxAttempts: number };

/**
 * How early a call may reach the receiver and still count as at its fire
 * time: the service's clock (API, Redis, workers) and the receiver's are this
 * host's one clock, so only rounding is allowed.
 */
const CLOCK_EPS_MS = 25;

type Problems = { add(p: string): void };
export type FiringUnderCheck = {
  row: Row;
  key: string;
  /** Its calls, by arrival. */
  calls: Call[];
  /** Every call the receiver answered with a success the caller got. */
  taken: ReadonlySet<unknown>;
  /** What the answers said of it; null for a firing none of them made (a retried request's). */
  model: Firing | null;
  /** Its timer had a request answered after a retry: a version may be unseen. */
  uncertain: boolean;
};

const iso = (ms: number) => new Date(ms).toISOString();

export function checkFiring(r: Real, p: Problems, x: FiringUnderCheck): { refused: number; calledAgain: boolean } {
  const { row: n, calls } = x;
  const fp = n.payload as FiringPayload;
  const fireAt = Date.parse(fp.fireAt);
  const name = `firing ${n.id} of ${x.key} (${n.status}, ${n.attempts} attempts)`;
  const taken = calls.filter((c) => x.taken.has(c));
  const ofFinal = calls.filter((c) => same(c.body.payload, fp.payload));
  if (n.dueAt?.getTime() !== fireAt) p.add(`${name}: due ${n.dueAt?.toISOString()}, its payload's fire time ${fp.fireAt}`);
  for (const c of calls) {
    const at = Date.parse(c.body.fireAt);
    if (c.at < at - CLOCK_EPS_MS) p.add(`${name}: called ${at - c.at} ms before its fire time ${c.body.fireAt}`);
  }
  if (x.model) checkAgainstModel(p, name, x.model, x, fp);

  // The record: DELIVERED exactly when the receiver took a call, of its fire time, the last one taken being its last attempt.
  let calledAgain = false;
  if (taken.length > 0) {
    const first = taken[0]!;
    // A receiver that took it, then refused a repeat a cut-off send made: the record follows the last answer (notifications suite).
    const refusedRepeat = cutOffBy(r, first) !== null && calls.some((c) => c.at > first.at && c.answer === 'reject');
    if (n.status === 'FAILED' && refusedRepeat) excuse(r, 'repeat of a cut-off success refused', `${name} after the receiver took it`);
    else if (n.status !== 'SENT') p.add(`${name}: the receiver took a call of it`);
    if (n.status === 'SENT') {
      if (!taken.some((c) => c.body.fireAt === fp.fireAt && c.body.key === x.key))
        p.add(`${name}: DELIVERED, and no call of its fire time ${fp.fireAt} went through`);
      if (taken.at(-1)!.body.attempt !== n.attempts) p.add(`${name}: its last call taken was attempt ${taken.at(-1)!.body.attempt}`);
    }
    if (taken.length > 1 || calls.some((c) => c.at > first.at)) {
      calledAgain = true;
      if (!repeatExplained(r, name, calls, x.taken, ofFinal.length, n.attempts)) p.add(`${name}: called again after the receiver took it`);
    }
  } else if (n.status === 'SENT') p.add(`${name}: DELIVERED, and the receiver never took a call of it`);

  // A refusal is final: the same firing is not called again (unless a fault cut the worker off before it recorded the refusal).
  const refusals = calls.filter((c) => c.answer === 'reject');
  for (const refusal of refusals) {
    const next = calls.find((c) => c.at > refusal.at);
    if (!next) continue;
    const cause = cutOffBy(r, refusal);
    if (cause) excuse(r, cause, `${name} called again after a refusal`);
    else p.add(`${name}: called again ${next.at - refusal.at} ms after the receiver refused it`);
  }

  // FAILED only after its attempts, or a refusal; every attempt recorded is a call of its fire time.
  const window = { from: fireAt - 2_000, to: (calls.at(-1)?.at ?? fireAt) + 5_000 };
  const faultIn = (kinds: readonly string[] | null) =>
    r.run.faultSpans.some((f) => (!kinds || kinds.includes(f.kind)) && f.from <= window.to && f.to >= window.from);
  if (n.status === 'FAILED' && taken.length === 0 && calls.at(-1)?.answer !== 'reject' && n.attempts < fp.maxAttempts) {
    const what = `${name} FAILED before its ${fp.maxAttempts} attempts, its last answer ${calls.at(-1)?.answer ?? 'none'} (${n.lastError})`;
    // A claim whose call a fault cut off, a handler the database failed, a lease lost: each uses a job attempt and records none.
    if (faultIn(null)) excuse(r, 'attempts used up by a fault', what);
    else p.add(what);
  }
  if (n.attempts > ofFinal.length) {
    const what = `${name}: ${n.attempts} attempts recorded, ${ofFinal.length} calls of its fire time`;
    // The client's signing secrets are read before the call: the database away there fails an attempt that made no call.
    if (faultIn(['pgOutage', 'terminatePg'])) excuse(r, 'attempt failed before its call (database away)', what);
    else p.add(what);
  }
  return { refused: refusals.length, calledAgain };
}

/** The firing as the answers left it: its last version recorded; no call of a version moved away, of a cancelled or a done firing after the answer that said so. */
function checkAgainstModel(p: Problems, name: string, f: Firing, x: FiringUnderCheck, fp: FiringPayload): void {
  const { row: n, calls } = x;
  const v = version(f);
  const taken = calls.filter((c) => x.taken.has(c));
  if (Date.parse(fp.fireAt) !== v.fireAt || !same(fp.payload, v.payload) || fp.maxAttempts !== v.maxAttempts) {
    p.add(`${name}: recorded ${fp.fireAt} ${JSON.stringify(fp.payload)}, the last answer ${iso(v.fireAt)} ${JSON.stringify(v.payload)}`);
  }
  // Each call carries a version an answer gave (a retried request's first attempt may have made one unseen).
  const versionOf = (c: Call): Version | undefined => f.versions.find((w) => same(w.payload, c.body.payload) && w.fireAt === Date.parse(c.body.fireAt));
  if (!x.uncertain)
    for (const c of calls) if (!versionOf(c)) p.add(`${name}: called with ${c.body.fireAt} ${JSON.stringify(c.body.payload)}, which no answer gave`);
  f.moves.forEach((mv, i) => {
    const old = f.versions[i]!;
    const late = calls.find((c) => c.at > mv.answeredAt && same(c.body.payload, old.payload));
    if (late) p.add(`${name}: called ${late.at - mv.answeredAt} ms after a change moved it away from ${iso(mv.from)}`);
  });
  if (f.burst?.maxWaitUntil != null && v.fireAt > f.burst.maxWaitUntil)
    p.add(`${name}: fires at ${iso(v.fireAt)}, past its burst's maximum wait ${iso(f.burst.maxWaitUntil)}`);
  if (f.cancelledAt !== null) {
    if (n.status !== 'CANCELLED') p.add(`${name}: a cancel of it was answered CANCELLED`);
    const after = calls.find((c) => c.at > f.cancelledAt!);
    if (after) p.add(`${name}: called ${after.at - f.cancelledAt} ms after a cancel of it was answered CANCELLED`);
  } else if (n.status === 'CANCELLED' && f.supersededAt === null) p.add(`${name}: neither a cancel of it answered CANCELLED nor a later firing`);
  if (f.supersededAt !== null) {
    // Withdrawn by the later firing: at most the call then running reaches the receiver after; a given-up firing is CANCELLED, a refused one stays FAILED.
    const after = calls.filter((c) => c.at > f.supersededAt!);
    if (after.length > 1) p.add(`${name}: called ${after.length} times after a later firing of its timer was answered`);
    if (n.status === 'FAILED' && calls.at(-1)?.answer !== 'reject') p.add(`${name}: FAILED, not refused, after a later firing of its timer was answered`);
  }
  if (f.deliveredBy !== null && !(n.status === 'SENT' && taken.some((c) => c.at <= f.deliveredBy!))) {
    p.add(`${name}: a cancel was answered TIMER_DELIVERED ${iso(f.deliveredBy)}, before the receiver took it`);
  }
  if (f.doneBy !== null) {
    const after = calls.find((c) => c.at > f.doneBy!);
    if (n.status === 'SENT' ? !taken.some((c) => c.at <= f.doneBy!) : after)
      p.add(`${name}: a replace answered 201 at ${iso(f.doneBy)} (its firing done), and it was not`);
  }
}

/**
 * Whether each call after the firing's first success is explained, as the
 * notifications suite's rule has it (runner.ts repeatExplained), by the
 * webhook-id: the success before it was cut off by a fault (cutOffBy), or
 * answered so slowly the service took it for a timeout and recorded it as a
 * failed attempt (its attempts cover every call of its fire time). A second
 * call while the first ran, or after a success answered at once, never is.
 */
function repeatExplained(r: Real, name: string, calls: Call[], taken: ReadonlySet<unknown>, callsOfFinal: number, attempts: number): boolean {
  const causes: string[] = [];
  for (const c of calls) {
    const before = calls.filter((d) => d.at < c.at && taken.has(d)).at(-1);
    if (!before) continue;
    const cause = cutOffBy(r, before) ?? (mayHaveTimedOut(before) && attempts >= callsOfFinal ? 'slow success taken for a timeout' : null);
    if (cause === null) return false;
    causes.push(cause);
  }
  for (const cause of causes) excuse(r, cause, `${name} called again after the receiver took it`);
  return true;
}
