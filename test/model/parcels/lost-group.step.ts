// The parcels model suite's lost-group step: an area's Redis group loses what
// waits in it while parcels keep coming, then the area is flushed, with more
// than its batch size waiting.
import { isRedisUnavailable, redisCall } from '../../../src/core/redis-call.js';
import { OnPick, type Real } from '../runner.js';
import { flushArea } from './changes.steps.js';
import { groupOfArea, noteLook, serviceBatcher } from './groups.probe.js';
import { intake } from './intake.steps.js';
import { type Area, type Model, parcelsOf, trackingOf } from './model.js';

/** Rounds of loss and intake at most: a size of 2 takes three to have more than 2 waiting. */
const ROUNDS = 3;

/** The area's parcels the model has waiting (none seen batched or withdrawn). */
const waitingIn = (m: Model, a: Area) => m.parcels.filter((x) => x.client === a.client && x.area === a.code && !x.batchId && !x.withdrawn && !x.movedTo);

/**
 * A manual flush while more than the area's batch size waits: its group in
 * Redis lost (its entries taken out, as a Redis that lost its last writes
 * leaves it) and taken in again up to one short of the size, round after
 * round, until more than the size waits in the database, which Redis counts
 * no more than one short of it; then the flush. It must take the oldest, up to the size, and
 * leave the rest waiting (and put back into Redis: the commit hands back what
 * it left). The reconciliation pass puts lost parcels older than its regroup
 * age back meanwhile, and a group it fills is batched FULL: the step's time
 * counts as a grouping of the area.
 */
export class LostGroupFlush extends OnPick<Model, Area> {
  protected list(m: Readonly<Model>) {
    return m.areas;
  }
  async act(m: Model, r: Real) {
    const area = this.picked(m);
    const size = area.versions.at(-1)?.size ?? 1;
    const from = Date.now();
    // A size of 1 never has a parcel wait in Redis: a plain flush.
    for (let round = 0; size > 1 && round < ROUNDS && waitingIn(m, area).length <= size; round++) {
      if (!(await lose(r, area, waitingIn(m, area)))) break;
      const base = parcelsOf(m, area.client);
      for (let k = 0; k < size - 1; k++) await intake(m, r, area, trackingOf(r, base + k));
    }
    noteLook(m, waitingIn(m, area).length > size ? 'lost group: flushed above the size' : 'lost group: flushed within the size');
    await flushArea(m, r, area);
    area.groupings.push({ from, to: Date.now() });
  }
  toString() {
    return `LostGroupFlush(${this.pick})`;
  }
}

/** Takes the parcels out of the area's group; false when Redis does not answer. */
async function lose(r: Real, area: Area, parcels: readonly { trackingNo: string }[]): Promise<boolean> {
  if (parcels.length === 0) return true;
  try {
    await redisCall(
      serviceBatcher(r).remove(
        groupOfArea(area),
        parcels.map((x) => x.trackingNo),
      ),
      'lost group: remove',
    );
    return true;
  } catch (err) {
    if (!isRedisUnavailable(err)) throw err;
    return false;
  }
}
