// The timers model suite's judgement of each answer, at once, against the
// model, and what the answer changes in it: a PUT (or a batch item) in each
// mode, a cancel, a read. `idAfter` is the timer's current firing as the
// database had it right after the answer (the steps run one at a time, so
// nothing else changed it in between).
import type { Reply } from '../../chaos/drivers/http.js';
import {
  type Burst,
  EPS_MS,
  type Firing,
  type Model,
  type PutInput,
  type Timer,
  type TimerJson,
  type Version,
  attemptsOf,
  codeOf,
  current,
  fail,
  find,
  same,
  version,
} from './model.js';
import type { ModelClient } from '../world.js';

const iso = (ms: number | null) => (ms === null ? 'none' : new Date(ms).toISOString());
const ms = (text: string | null | undefined) => (text ? Date.parse(text) : null);

/**
 * The fire time a PUT asked for (its moment lies between the request's send
 * and its answer), capped by the burst's maximum wait: never past it.
 */
function judgeFireAt(by: string, res: Reply, input: PutInput, cap: number | null): number {
  const fireAt = Date.parse((res.body as TimerJson).fireAt);
  let low = input.fireAt ?? res.firstSentAt + (input.delayMs ?? 0) - EPS_MS;
  let high = input.fireAt ?? res.receivedAt + (input.delayMs ?? 0) + EPS_MS;
  if (cap !== null) {
    if (fireAt > cap) fail(`${by}: fire time ${iso(fireAt)} past the burst's maximum wait ${iso(cap)}`, res);
    low = Math.min(low, cap);
    high = Math.min(high, cap);
  }
  if (fireAt < low || fireAt > high) fail(`${by}: fire time ${iso(fireAt)} outside ${iso(low)}..${iso(high)}`, res);
  return fireAt;
}

/** The burst a debounce answered 200 (the pending firing `f` pushed) or 201 (a new one) is in; its cap as the answer tells it, judged. */
function judgeBurst(by: string, res: Reply, input: PutInput, f: Firing | null): Burst {
  const told = ms((res.body as TimerJson).maxWaitUntil);
  if (f?.burst) {
    // A burst keeps its first call's maximum wait (none included): a later call never moves it.
    if (told !== f.burst.maxWaitUntil) fail(`${by}: the burst's maximum wait moved from ${iso(f.burst.maxWaitUntil)} to ${iso(told)}`, res);
    return f.burst;
  }
  const b: Burst = { startLow: res.firstSentAt, startHigh: res.receivedAt, maxWaitMs: input.maxWaitMs ?? null, maxWaitUntil: told };
  if (b.maxWaitMs === null) {
    if (told !== null) fail(`${by}: a maximum wait ${iso(told)} that no call asked for`, res);
  } else if (told === null || told < b.startLow + b.maxWaitMs - EPS_MS || told > b.startHigh + b.maxWaitMs + EPS_MS) {
    fail(`${by}: maximum wait ${iso(told)}, not the burst's first call + ${b.maxWaitMs} ms`, res);
  }
  return b;
}

function newFiring(id: string, v: Version, burst: Burst | null): Firing {
  return { id, versions: [v], moves: [], burst, cancelledAt: null, deliveredBy: null, doneBy: null, supersededAt: null };
}

/** Judges a PUT's answer (or a batch item's, `res` carrying its status and timer) and applies it to the model. */
export function applyPut(m: Model, as: ModelClient, key: string, input: PutInput, res: Reply, idAfter: string | null): void {
  const by = `PUT ${key} (${input.mode}) as ${as}`;
  const t = find(m, as, key);
  const f = t ? current(t) : null;
  const retried = res.attempts > 1;
  if (res.status === 409 && codeOf(res) === 'TIMER_DELIVERING' && t && f && input.mode === 'replace') {
    if (f.cancelledAt !== null) fail(`${by}: its firing was cancelled (done), answered as being delivered`, res);
    if (idAfter !== f.id) fail(`${by}: answered 409, yet its current firing changed (${f.id} to ${idAfter})`, res);
    if (retried) t.uncertain = true;
    m.counts.delivering409++;
    return;
  }
  if (res.status !== 200 && res.status !== 201) fail(by, res);
  const body = res.body as TimerJson;
  if (body.key !== key || idAfter === null) fail(`${by}: not the timer asked for (its firing: ${idAfter})`, res);
  if (t && f && input.mode === 'keep') {
    // keep never changes a timer that exists, whatever its state: the answer is the timer as the model has it.
    if (res.status !== 200 || idAfter !== f.id) fail(`${by}: keep changed the timer (its firing ${f.id}; now ${idAfter})`, res);
    judgeRead(t, `${by}: keep changed the timer`, res, body);
    m.counts.keeps++;
    return;
  }
  const moved = f !== null && idAfter === f.id;
  // A change is answered as read under the timer's lock: pending. A new timer's job is scheduled before its read: it may be delivered by then.
  const states = t ? ['PENDING'] : ['PENDING', 'DELIVERING', 'DELIVERED', 'FAILED'];
  if (!states.includes(body.state) || !same(body.payload, input.payload) || body.maxAttempts !== attemptsOf(input)) {
    fail(`${by}: not the firing asked for (after ${res.attempts} attempts)`, res);
  }
  if (!retried) {
    if (!t && res.status !== 201) fail(`${by}: a new timer answered ${res.status}`, res);
    if (f && moved !== (res.status === 200)) fail(`${by}: answered ${res.status}, its firing ${moved ? 'kept' : 'new'} (${f.id} to ${idAfter})`, res);
    if (f && moved && f.cancelledAt !== null) fail(`${by}: moved a cancelled firing`, res);
  } else if (t) t.uncertain = true;
  const burst = input.mode === 'debounce' ? judgeBurst(by, res, input, moved ? f : null) : null;
  const fireAt = judgeFireAt(by, res, input, burst?.maxWaitUntil ?? null);
  const v: Version = { fireAt, payload: input.payload, maxAttempts: attemptsOf(input) };
  if (f && moved) {
    f.moves.push({ from: version(f).fireAt, answeredAt: res.receivedAt });
    f.versions.push(v);
    f.burst = burst;
    m.counts.moved++;
    return;
  }
  // A replace fires again only once the firing is done (delivered, failed, cancelled): a debounce also while it is delivered.
  if (f && input.mode === 'replace' && !retried) f.doneBy = res.receivedAt;
  if (f) {
    f.supersededAt = res.receivedAt;
    m.counts.refiredByPut++;
  }
  const firing = newFiring(idAfter, v, burst);
  if (t) t.firings.push(firing);
  else m.timers.push({ client: as, key, firings: [firing], uncertain: retried });
}

/** Judges a cancel's answer and applies it. */
export function applyCancel(m: Model, as: ModelClient, key: string, res: Reply, idAfter: string | null): void {
  const by = `DELETE ${key} as ${as}`;
  const t = find(m, as, key);
  if (!t) {
    if (res.status !== 404 || codeOf(res) !== 'TIMER_NOT_FOUND') fail(`${by}: no such timer`, res);
    return;
  }
  const f = current(t);
  if (idAfter !== f.id) fail(`${by}: its current firing changed (${f.id} to ${idAfter})`, res);
  if (res.status === 200) {
    const v = version(f);
    const body = res.body as TimerJson;
    if (body.state !== 'CANCELLED' || Date.parse(body.fireAt) !== v.fireAt || !same(body.payload, v.payload) || body.maxWaitUntil !== null) {
      fail(`${by}: not the firing as it was, CANCELLED`, res);
    }
    f.cancelledAt ??= res.receivedAt;
    f.burst = null;
    m.counts.cancels++;
    return;
  }
  const code = res.status === 409 ? codeOf(res) : '';
  if (code !== 'TIMER_DELIVERING' && code !== 'TIMER_DELIVERED') fail(by, res);
  if (f.cancelledAt !== null) fail(`${by}: a cancelled firing answered ${code}`, res);
  if (code === 'TIMER_DELIVERED') f.deliveredBy ??= res.receivedAt;
}

/** Judges a read of one timer (GET, or an entry of a list) against the model. */
export function judgeRead(t: Timer | undefined, by: string, res: Reply, body: TimerJson | undefined): void {
  if (!t) {
    if (res.status !== 404 || codeOf(res) !== 'TIMER_NOT_FOUND') fail(`${by}: no such timer`, res);
    return;
  }
  if (res.status !== 200 || !body) fail(by, res);
  const f = current(t);
  const v = version(f);
  const cap = f.burst?.maxWaitUntil ?? null;
  const problems = [
    body.key !== t.key && 'key',
    Date.parse(body.fireAt) !== v.fireAt && `fire time (the model's ${iso(v.fireAt)})`,
    !same(body.payload, v.payload) && 'payload',
    body.maxAttempts !== v.maxAttempts && 'maxAttempts',
    ms(body.maxWaitUntil) !== cap && `maximum wait (the model's ${iso(cap)})`,
    f.cancelledAt !== null && body.state !== 'CANCELLED' && 'state (cancelled)',
    f.deliveredBy !== null && body.state !== 'DELIVERED' && 'state (delivered)',
    f.cancelledAt === null && body.state === 'CANCELLED' && 'state (never cancelled)',
    body.attempts > body.maxAttempts && 'attempts',
  ].filter(Boolean);
  if (problems.length) fail(`${by}: ${problems.join(', ')} disagree with the model: ${JSON.stringify(body)}`, res);
}
