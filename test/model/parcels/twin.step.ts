// The parcels model suite's twin step: both clients take in the same
// tracking numbers at once into their areas of one code.
import { isRedisUnavailable, redisCall } from '../../../src/core/redis-call.js';
import { groupOf } from '../../../src/modules/parcels/parcels.groups.js';
import { PARCELS_QUEUE } from '../../../src/modules/parcels/parcels.module.js';
import { type Real, Step } from '../runner.js';
import { MODEL_CLIENTS } from '../world.js';
import { intake, putArea } from './intake.steps.js';
import { AREAS, MAX_WAIT_MS, type Model, SIZE } from './model.js';

/**
 * Both clients take in the same `n` tracking numbers into their areas of one
 * code, all sent at once: single intakes sent together share one INSERT, so
 * the twins often arrive at the same moment and, into groups that were empty,
 * fall due together: one flush round commits both clients' batches in one
 * statement, naming each tracking number for two batches of two clients
 * (where attaching a parcel by its tracking number alone would put one
 * client's parcel into the other's batch). The code: one whose groups (both
 * clients') are empty in Redis, its areas put where missing; else one both
 * clients have; else a new pair is put.
 */
export class TwinIntake extends Step<Model> {
  constructor(
    readonly pick: number,
    readonly n: number,
    readonly plate: string,
  ) {
    super();
  }
  async act(m: Model, r: Real) {
    const numbers = Array.from({ length: this.n }, (_, k) => `${r.tag}-w${m.twins.length + k}`);
    m.twins.push(...numbers);
    const index = await this.index(m, r);
    const pair = await Promise.all(
      MODEL_CLIENTS.map(async (c) => m.areas.find((a) => a.client === c && a.index === index) ?? putArea(m, r, c, index, this.plate)),
    );
    await Promise.all(numbers.flatMap((t) => pair.map((area) => intake(m, r, area, t))));
  }
  private async index(m: Model, r: Real): Promise<number> {
    const batcher = r.world.batcher(PARCELS_QUEUE, { batchSize: SIZE, maxWaitMs: MAX_WAIT_MS });
    const order = Array.from({ length: AREAS }, (_, k) => (this.pick + k) % AREAS);
    const areas = (i: number) => m.areas.filter((a) => a.index === i);
    try {
      for (const i of order) {
        const waiting = await Promise.all(areas(i).map((a) => redisCall(batcher.waiting(groupOf(a)), 'twin: waiting')));
        if (waiting.every((w) => w.count === 0)) return i;
      }
    } catch (err) {
      // Redis restarting after a fault: any code will do.
      if (!isRedisUnavailable(err)) throw err;
    }
    return order.find((i) => areas(i).length === MODEL_CLIENTS.length) ?? (order[0] as number);
  }
  toString() {
    return `TwinIntake(${this.pick}, ${this.n}, ${this.plate})`;
  }
}
