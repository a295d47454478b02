// The timers model suite's writes: a PUT in each mode (replace, keep,
// debounce with its maximum wait) on a key of the run's few (so it meets
// timers that exist, of either client), a change of a timer's fire time
// (earlier or later), a keep of a timer that exists, a batch of PUTs, and a
// debounce burst of several calls.
import { OnPick, type Real, Step, dbRead } from '../runner.js';
import type { ModelClient } from '../world.js';
import { applyPut } from './judge.js';
import { type Mode, type Model, type PutInput, type Timer, bodyOf, current, fail, firingIdOf, freshKey, poolKey, version } from './model.js';

/** Sends one PUT, judges its answer and applies it. */
export async function put(m: Model, r: Real, as: ModelClient, key: string, input: PutInput): Promise<void> {
  const res = await r.world.httpAs(as).send('PUT', `/timers/${key}`, bodyOf(r, input));
  applyPut(m, as, key, input, res, await firingIdOf(r, as, key));
}

/** What a drawn PUT asks for: its fire time `delayMs` from now (as delayMs, or as an absolute fireAt), its burst's wait, its attempts. */
export type Ask = { mode: Mode; delayMs: number; absolute: boolean; maxWaitMs: number | undefined; maxAttempts: number | undefined };

export function inputOf(m: Model, a: Ask): PutInput {
  const payload = { n: m.seq++ };
  if (a.mode === 'debounce') return { mode: a.mode, delayMs: a.delayMs, payload, maxWaitMs: a.maxWaitMs, maxAttempts: a.maxAttempts };
  const when = a.absolute ? { fireAt: Date.now() + a.delayMs } : { delayMs: a.delayMs };
  return { mode: a.mode, ...when, payload, maxAttempts: a.maxAttempts };
}

const askText = (a: Ask) =>
  `${a.mode} in ${a.delayMs} ms${a.absolute ? ' (fireAt)' : ''}${a.maxWaitMs !== undefined ? `, maxWait ${a.maxWaitMs}` : ''}${a.maxAttempts !== undefined ? `, ${a.maxAttempts} attempts` : ''}`;

/** A PUT of one of the run's keys: creates the timer, or changes it as its mode says. */
export class Put extends Step<Model> {
  constructor(
    readonly as: ModelClient,
    readonly keyIndex: number,
    readonly ask: Ask,
  ) {
    super();
  }
  async act(m: Model, r: Real) {
    await put(m, r, this.as, poolKey(r, this.keyIndex), inputOf(m, this.ask));
  }
  toString() {
    return `Put(${this.as}, k${this.keyIndex}, ${askText(this.ask)})`;
  }
}

/** A timer of the run: its own client changes its fire time, earlier or later than the model has it (replace). */
export class Change extends OnPick<Model, Timer> {
  constructor(
    pick: number,
    readonly deltaMs: number,
  ) {
    super(pick);
  }
  protected list(m: Readonly<Model>) {
    return m.timers;
  }
  async act(m: Model, r: Real) {
    const t = this.picked(m);
    const fireAt = Math.max(Date.now() - 1_000, version(current(t)).fireAt + this.deltaMs);
    await put(m, r, t.client, t.key, { mode: 'replace', fireAt, payload: { n: m.seq++ } });
  }
  toString() {
    return `Change(${this.pick}, ${this.deltaMs > 0 ? '+' : ''}${this.deltaMs} ms)`;
  }
}

/** A timer of the run: its own client PUTs it again with mode keep, another fire time and payload: answered 200 as it is, never changed. */
export class Keep extends OnPick<Model, Timer> {
  constructor(
    pick: number,
    readonly delayMs: number,
  ) {
    super(pick);
  }
  protected list(m: Readonly<Model>) {
    return m.timers;
  }
  async act(m: Model, r: Real) {
    const t = this.picked(m);
    await put(m, r, t.client, t.key, { mode: 'keep', delayMs: this.delayMs, payload: { n: m.seq++ }, maxAttempts: 1 });
  }
  toString() {
    return `Keep(${this.pick}, in ${this.delayMs} ms)`;
  }
}

/** POST /timers/batch: a few of the run's keys (some exist, some not) and a new one, each judged as its own PUT. */
export class Batch extends Step<Model> {
  constructor(
    readonly as: ModelClient,
    readonly items: readonly { keyIndex: number; ask: Ask }[],
  ) {
    super();
  }
  async act(m: Model, r: Real) {
    const items = this.items.map((i) => ({ key: poolKey(r, i.keyIndex), input: inputOf(m, i.ask) }));
    items.push({
      key: freshKey(m, r, 'b'),
      input: inputOf(m, { mode: 'replace', delayMs: 300, absolute: false, maxWaitMs: undefined, maxAttempts: undefined }),
    });
    const res = await r.world.httpAs(this.as).send('POST', '/timers/batch', { timers: items.map((i) => ({ key: i.key, ...bodyOf(r, i.input) })) });
    const results = res.body.results as { key: string; status: number; timer?: Record<string, unknown>; error?: { code: string } }[] | undefined;
    if (res.status !== 200 || results?.length !== items.length) fail(`batch of ${items.length} as ${this.as}`, res);
    const ids = await dbRead(() =>
      r.world.db.timer.findMany({ where: { client: this.as, key: { in: items.map((i) => i.key) } }, select: { key: true, notificationId: true } }),
    );
    items.forEach((it, i) => {
      const got = results[i]!;
      if (got.key !== it.key) fail(`batch item ${i}: answered for ${got.key}, not ${it.key}`, res);
      const one = { ...res, status: got.status, body: got.timer ?? got.error ?? {} };
      applyPut(m, this.as, it.key, it.input, one, ids.find((x) => x.key === it.key)?.notificationId ?? null);
    });
  }
  toString() {
    return `Batch(${this.as}, ${this.items.map((i) => `k${i.keyIndex} ${askText(i.ask)}`).join('; ')})`;
  }
}

/**
 * A debounce burst: `calls` calls `gapMs` apart, each pushing the fire time
 * to now + delayMs, never past the first call + maxWaitMs (a firing due
 * within the burst fires, and the next call starts a new burst).
 */
export class DebounceBurst extends Step<Model> {
  constructor(
    readonly as: ModelClient,
    readonly keyIndex: number | null,
    readonly calls: number,
    readonly delayMs: number,
    readonly maxWaitMs: number,
    readonly gapMs: number,
  ) {
    super();
  }
  async act(m: Model, r: Real) {
    const key = this.keyIndex === null ? freshKey(m, r, 'd') : poolKey(r, this.keyIndex);
    m.counts.bursts++;
    for (let i = 0; i < this.calls; i++) {
      if (i > 0) await new Promise((res) => setTimeout(res, this.gapMs));
      await put(m, r, this.as, key, { mode: 'debounce', delayMs: this.delayMs, maxWaitMs: this.maxWaitMs, payload: { n: m.seq++ } });
    }
  }
  toString() {
    return `DebounceBurst(${this.as}, ${this.keyIndex === null ? 'new key' : `k${this.keyIndex}`}, ${this.calls} calls ${this.gapMs} ms apart, delay ${this.delayMs}, maxWait ${this.maxWaitMs})`;
  }
}
