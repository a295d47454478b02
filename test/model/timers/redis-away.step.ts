// The timers model suite's aimed step at the claim's early guard: a timer
// moved later while Redis cannot take the move's new delivery job, so the old
// job, due at the old fire time, stays and comes first. Its claim must answer
// `early` (src/core/delivery/claim.ts) and the firing wait for the fire time
// the move answered; random steps meet this only when a fault happens to
// fall between a timer's creation and a later move.
import { type Real, Step } from '../runner.js';
import type { ModelClient } from '../world.js';
import { put } from './put.steps.js';
import { type Model, current, find, freshKey, version } from './model.js';

/** How Redis loses the move's job: its connections gone silent before the move, or a restart losing its last second after it. */
export type Away = 'silenceRedis' | 'restartRedis';

/** Past the last second of writes a Redis restart loses (world.ts restartRedis): the create's job survives it. */
const KEPT_MS = 1_200;

export class MoveLaterRedisAway extends Step<Model> {
  constructor(
    readonly how: Away,
    readonly firstMs: number,
    readonly laterMs: number,
    readonly as: ModelClient,
  ) {
    super();
  }
  async act(m: Model, r: Real) {
    const withFaults = process.env.MODEL_FAULTS !== '0';
    const key = freshKey(m, r, 'e');
    await put(m, r, this.as, key, { mode: 'replace', delayMs: (this.how === 'restartRedis' ? KEPT_MS : 0) + this.firstMs, payload: { n: m.seq++ } });
    const later = () =>
      put(m, r, this.as, key, { mode: 'replace', fireAt: version(current(find(m, this.as, key)!)).fireAt + this.laterMs, payload: { n: m.seq++ } });
    if (this.how === 'silenceRedis') {
      if (withFaults) await r.world.fault('silenceRedis', r.run);
      await later();
      return;
    }
    await new Promise((res) => setTimeout(res, KEPT_MS));
    await later();
    if (withFaults) await r.world.fault('restartRedis', r.run);
  }
  toString() {
    return `MoveLaterRedisAway(${this.how}, due in ${this.firstMs} ms, moved ${this.laterMs} ms later, ${this.as})`;
  }
}
