// The timers model suite's cancels and reads: a client cancels or reads one
// of its timers, lists its run's timers, and the other client reads and
// cancels a key only the first has (answered as a key nothing has).
import type { Reply } from '../../chaos/drivers/http.js';
import { OnPick, type Real, Step, answeredAsUnknown } from '../runner.js';
import type { ModelClient } from '../world.js';
import { applyCancel, judgeRead } from './judge.js';
import { type Model, type Timer, type TimerJson, codeOf, fail, find, firingIdOf, otherClient, runPrefix } from './model.js';

/** Cancels a timer, judges the answer and applies it. */
export async function cancel(m: Model, r: Real, as: ModelClient, key: string): Promise<void> {
  const res = await r.world.httpAs(as).send('DELETE', `/timers/${key}`);
  applyCancel(m, as, key, res, await firingIdOf(r, as, key));
}

/** Its client cancels one of the run's timers: CANCELLED while pending or failed, 409 while delivered or being delivered. */
export class Cancel extends OnPick<Model, Timer> {
  protected list(m: Readonly<Model>) {
    return m.timers;
  }
  async act(m: Model, r: Real) {
    const t = this.picked(m);
    await cancel(m, r, t.client, t.key);
  }
  toString() {
    return `Cancel(${this.pick})`;
  }
}

/** Its client reads one of the run's timers: the fire time, payload and burst the model has, and a state that agrees. */
export class Read extends OnPick<Model, Timer> {
  protected list(m: Readonly<Model>) {
    return m.timers;
  }
  async act(m: Model, r: Real) {
    const t = this.picked(m);
    const res = await r.world.httpAs(t.client).send('GET', `/timers/${t.key}`);
    judgeRead(t, `GET ${t.key} as ${t.client}`, res, res.body as TimerJson);
  }
  toString() {
    return `Read(${this.pick})`;
  }
}

/** A client lists its timers of the run: exactly those the model has for it, each as the model has it. */
export class List extends Step<Model> {
  constructor(readonly as: ModelClient) {
    super();
  }
  async act(m: Model, r: Real) {
    const res = await r.world.httpAs(this.as).send('GET', `/timers?prefix=${runPrefix(r)}&limit=1000`);
    const by = `list of ${this.as}'s timers`;
    if (res.status !== 200 || !Array.isArray(res.body.timers)) fail(by, res);
    const listed = res.body.timers as TimerJson[];
    const mine = m.timers
      .filter((t) => t.client === this.as)
      .map((t) => t.key)
      .sort();
    const keys = listed.map((t) => t.key);
    if (JSON.stringify([...keys].sort()) !== JSON.stringify(mine)) fail(`${by}: ${keys.join(' ')}, the model has ${mine.join(' ')}`, res);
    for (const body of listed) judgeRead(find(m, this.as, body.key), `${by}, ${body.key}`, res, body);
  }
  toString() {
    return `List(${this.as})`;
  }
}

/**
 * The other client reads and cancels a key only the timer's client has: each
 * answered as a key nothing has (404), and the cancel changes nothing (the
 * settle check finds a firing CANCELLED that no cancel of its client
 * answered).
 */
export class ForeignRead extends OnPick<Model, Timer> {
  protected list(m: Readonly<Model>) {
    return m.timers.filter((t) => !find(m as Model, otherClient(t.client), t.key));
  }
  async act(m: Model, r: Real) {
    const t = this.picked(m);
    const other = r.world.httpAs(otherClient(t.client));
    const notFound = (res: Reply) => res.status === 404 && codeOf(res) === 'TIMER_NOT_FOUND';
    const by = (what: string) => `${what} of ${t.key} (of ${t.client}) by ${otherClient(t.client)}`;
    await answeredAsUnknown(r, 'get', by('GET'), t.key, (key) => other.send('GET', `/timers/${key}`), notFound);
    await answeredAsUnknown(r, 'delete', by('DELETE'), t.key, (key) => other.send('DELETE', `/timers/${key}`), notFound);
  }
  toString() {
    return `ForeignRead(${this.pick})`;
  }
}
