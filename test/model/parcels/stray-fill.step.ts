// The parcels model suite's aimed step for a FULL batch that names a stray:
// a parcel of one area planted into another's group, which intakes of that
// area then fill up at once, so the FULL take names a parcel its area's
// commit must refuse.
import { isRedisUnavailable, redisCall } from '../../../src/core/redis-call.js';
import { PARCELS_QUEUE } from '../../../src/modules/parcels/parcels.module.js';
import { OnPick, type Real } from '../runner.js';
import { Intake } from './intake.steps.js';
import { FLUSH_SLACK_MS, MAX_WAIT_MS, type Model, PLATES, type Parcel, SIZE, areaOf } from './model.js';
import { groupOfArea, newArea } from './stray-entry.step.js';

/**
 * Plants parcel `pick` (with the arrival "now") into the group of another
 * area (or a new one) with room, or (`own`) a parcel seen batched into its
 * own area's group (a stale entry), then takes in as many new parcels of that
 * area as make the group full: the take holds one parcel fewer than the batch
 * size that its commit may have (of its area, not yet batched), so it is no
 * FULL batch (the commit drops the stray, and a batch short of the size waits
 * for more or its deadline), and a batched parcel stays in its batch.
 */
export class StrayThenFill extends OnPick<Model, Parcel> {
  constructor(
    pick: number,
    readonly other: number,
    readonly own: boolean,
  ) {
    super(pick);
  }
  protected list(m: Readonly<Model>) {
    return this.own ? m.parcels.filter((x) => x.batchId !== null) : m.parcels;
  }
  async act(m: Model, r: Real) {
    const p = this.picked(m);
    const batcher = r.world.batcher(PARCELS_QUEUE, { batchSize: SIZE, maxWaitMs: MAX_WAIT_MS });
    const others = m.areas.filter((a) => a.client !== p.client || a.code !== p.area);
    const into =
      (this.own ? areaOf(m, p.client, p.area) : others[this.other % Math.max(1, others.length)]) ??
      (await newArea(m, r, p, PLATES[this.other % PLATES.length] as string));
    if (!into) return;
    const group = groupOfArea(into);
    let waiting: number;
    try {
      waiting = (await redisCall(batcher.waiting(group), 'stray: waiting')).count;
      if (waiting >= SIZE - 1) return; // an add here would complete a batch this step cannot commit
      // The group's parcels, taken and put back around the stray, may make a
      // FULL batch at the put-back (held at most a maximum wait): an intake's turn.
      const from = Date.now();
      into.groupings.push({ from, to: from + 2 * MAX_WAIT_MS + FLUSH_SLACK_MS });
      const added = await redisCall(batcher.add(group, p.trackingNo, from), 'stray: add');
      if (added.batches.length > 0) await redisCall(batcher.restore(group, added.batches.flat()), 'stray: put back');
      if (added.late || !added.added) return;
      m.strays++;
    } catch (err) {
      // Redis restarting after a fault: no stray this time.
      if (!isRedisUnavailable(err)) throw err;
      return;
    }
    await new Intake(m.areas.indexOf(into), SIZE - 1 - waiting).act(m, r);
  }
  toString() {
    return `StrayThenFill(${this.pick}, ${this.own ? 'own area' : this.other})`;
  }
}
