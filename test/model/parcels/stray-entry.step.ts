// The parcels model suite's stray-entry step: a parcel of one area planted
// into another area's Redis group (of either client), aimed at its parcel's
// deadline.
import { isRedisUnavailable, redisCall } from '../../../src/core/redis-call.js';
import { PARCELS_QUEUE } from '../../../src/modules/parcels/parcels.module.js';
import { MAX_HOLD_MS } from '../../../src/modules/parcels/parcels.batches.js';
import { groupOf } from '../../../src/modules/parcels/parcels.groups.js';
import type { Batcher } from '../../../src/queue/index.js';
import { type Real, Step } from '../runner.js';
import { putArea } from './intake.steps.js';
import { AREAS, type Area, FLUSH_SLACK_MS, MAX_WAIT_MS, type Model, PLATES, type Parcel, SIZE, areaOf, otherClient } from './model.js';

/** The service's group of a model's area (parcels.groups.ts: the client's, for two areas of one code). */
export const groupOfArea = (a: Area) => groupOf({ client: a.client, code: a.code });

/** A new area (an index neither client has, else one the parcel's client has not, else one the other client has not); null when every one exists. */
export async function newArea(m: Model, r: Real, p: Parcel, plate: string): Promise<Area | null> {
  const indices = Array.from({ length: AREAS }, (_, i) => i);
  const free = (client: string, i: number) => !m.areas.some((a) => a.client === client && a.index === i);
  const clients = [p.client, otherClient(p.client)];
  const fresh = indices.find((i) => clients.every((c) => free(c, i)));
  for (const client of clients) {
    const index = fresh ?? indices.find((i) => free(client, i));
    if (index !== undefined) return putArea(m, r, client, index, plate);
  }
  return null;
}

/**
 * Plants a stray entry, as a stale or corrupt Redis entry would be: an
 * accepted parcel of one area added to the Redis group of another (of its
 * client, or of the other client, the same code or not), with its arrival
 * (every entry the service writes carries its row's). The batch commit must
 * give it to a batch of its own area only: the other area's take that names
 * it (FULL or TIMEOUT) drops it there, even when that area's client has a
 * parcel of the same tracking number (batched or not: the commit judges it).
 *
 * Aimed at the case the commit once got wrong (a parcel named by batches of
 * two areas in one statement, lost from both: parcels.regroup.test.ts has it
 * directed): the parcel an area's wait counts from (its group's first arrival
 * in Redis, not yet due; of the area with the fewest waiting that has one,
 * else any parcel not seen batched), put into an area not due before it,
 * which then falls due at the same moment: both are taken in one flush round
 * and committed together. Planted with the arrival "now", the other area
 * would fall due a maximum wait later, long after the parcel's own area took
 * it. When that other area waits on a parcel of its own, that one is put the
 * other way (a swap): one commit then names each parcel in two batches, and
 * whichever batch id is the lower, one of the two is the case. Where no area
 * fits, a new one is put first (as PutArea does).
 *
 * Only into a group with room (fewer than the batch size but one waiting): an
 * add that completes a batch hands it to its caller to commit, and this caller
 * commits nothing (the batch would be in neither Redis nor the database). One
 * that comes back all the same (the service put parcels back between the look
 * and the add) goes back into the group, as the flusher puts back a batch it
 * could not commit: the next add or take has it.
 */
export class StrayEntry extends Step<Model> {
  constructor(
    readonly pick: number,
    readonly other: number,
  ) {
    super();
  }
  override check(m: Readonly<Model>) {
    return m.parcels.some((x) => x.batchId === null);
  }
  async act(m: Model, r: Real) {
    const batcher = r.world.batcher(PARCELS_QUEUE, { batchSize: SIZE, maxWaitMs: MAX_WAIT_MS });
    const unbatched = m.parcels.filter((x) => x.batchId === null);
    const firstOf = async (area: Area): Promise<{ p: Parcel; waiting: number } | null> => {
      const w = await redisCall(batcher.waiting(groupOfArea(area)), 'stray: waiting');
      // Not yet due: past it, the flusher is taking the area now.
      const p = unbatched.find(
        (x) => x.client === area.client && x.area === area.code && x.createdAt === w.firstArrival && x.createdAt + MAX_WAIT_MS > Date.now(),
      );
      return p ? { p, waiting: w.count } : null;
    };
    try {
      // Of the area with the fewest waiting (the likeliest to wait for its deadline, not to fill first).
      let aimed: { p: Parcel; waiting: number } | null = null;
      for (let k = 0; k < m.areas.length; k++) {
        const f = await firstOf(m.areas[(this.pick + k) % m.areas.length] as Area);
        if (f && (!aimed || f.waiting < aimed.waiting)) aimed = f;
      }
      const p = aimed?.p ?? (unbatched[this.pick % unbatched.length] as Parcel);
      const into = await this.into(m, r, p, batcher);
      if (!into) return;
      // Read before the plant, which makes the parcel that area's first arrival.
      const back = aimed && (await firstOf(into));
      await plantStray(m, batcher, p, into, aimed !== null);
      const home = areaOf(m, p.client, p.area) as Area;
      if (back && (await redisCall(batcher.waiting(groupOfArea(home)), 'stray: waiting')).count < SIZE - 1) await plantStray(m, batcher, back.p, home, true);
    } catch (err) {
      // Redis restarting after a fault: no stray this time (or one whose
      // answer was lost: plantStray's window holds for it).
      if (!isRedisUnavailable(err)) throw err;
    }
  }
  /** Another area with room in its group: one waiting, not due before the parcel; else an empty one; else a new one; else one due before it. */
  private async into(m: Model, r: Real, p: Parcel, batcher: Batcher): Promise<Area | null> {
    const others = m.areas.filter((a) => a.client !== p.client || a.code !== p.area);
    let empty: Area | null = null;
    let sooner: Area | null = null;
    for (let k = 0; k < others.length; k++) {
      const area = others[(this.other + k) % others.length] as Area;
      const w = await redisCall(batcher.waiting(groupOfArea(area)), 'stray: waiting');
      if (w.count >= SIZE - 1) continue;
      if (w.firstArrival === null) empty ??= area;
      else if (w.firstArrival >= p.createdAt) return area;
      else sooner ??= area;
    }
    if (empty) return empty;
    return (await newArea(m, r, p, PLATES[this.other % PLATES.length] as string)) ?? sooner;
  }
  toString() {
    return `StrayEntry(${this.pick}, ${this.other})`;
  }
}

/** Adds parcel `p` to the group of area `into` (not its own) with its arrival; `aimed`: it is the one its area's wait counts from. */
async function plantStray(m: Model, batcher: Batcher, p: Parcel, into: Area, aimed: boolean): Promise<void> {
  // The stray moves that area's first arrival back to the parcel's: the
  // flusher takes the area's own parcels out at the parcel's deadline, the
  // database refuses them as not yet due, and the service holds them up to
  // MAX_HOLD_MS before putting them back, where they may complete a batch
  // with parcels taken in meanwhile. That put-back groups the area as an
  // intake does: a FULL batch it makes is not made out of turn.
  const from = Date.now();
  into.groupings.push({ from, to: Math.max(from, p.createdAt + MAX_WAIT_MS) + MAX_HOLD_MS + FLUSH_SLACK_MS });
  const group = groupOfArea(into);
  const r = await redisCall(batcher.add(group, p.trackingNo, p.createdAt), 'stray: add');
  if (r.batches.length > 0) await redisCall(batcher.restore(group, r.batches.flat()), 'stray: put back');
  if (r.late || !r.added) return;
  m.strays++;
  if (aimed && !m.aimed.some((s) => s.client === p.client && s.trackingNo === p.trackingNo))
    m.aimed.push({ client: p.client, trackingNo: p.trackingNo, into: group });
}
