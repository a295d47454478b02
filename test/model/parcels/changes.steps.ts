// The parcels model suite's changes to what waits: an area's rule changed
// (its own batch size and maximum wait, or back to the defaults), a manual
// flush, a parcel withdrawn or moved to another area of its client, and all
// of them at once on one area (a flush racing the FULL add and a withdraw).
// Each answer is held to the model at once: a flushed batch MANUAL, of its
// area's parcels only, none of them withdrawn or seen in another batch,
// within the area's size; a withdrawn parcel never in a batch; a moved one
// in its new area with its arrival kept; after a rule change, the group's
// deadline counted by the area's new maximum wait (groups.probe.ts).
import { OnPick, type Real } from '../runner.js';
import { checkDeadline, waitingCount } from './groups.probe.js';
import { OnParcel, intake, putArea } from './intake.steps.js';
import {
  type Area,
  type Model,
  type Parcel,
  type RULE_SIZES,
  type RULE_WAITS_S,
  type SeenBatch,
  fail,
  keyOf,
  noteBatch,
  noteChange,
  observeParcel,
  parcelOf,
  parcelsOf,
  trackingOf,
  versionsAt,
  windowOf,
} from './model.js';

/** POST /areas/:code/flush as the area's client: a MANUAL batch of its own waiting parcels, or 409 NOTHING_WAITING. */
export async function flushArea(m: Model, r: Real, area: Area): Promise<void> {
  const res = await r.world.httpAs(area.client).send('POST', `/areas/${area.code}/flush`);
  const w = windowOf(res);
  (area.flushes ??= []).push(w);
  // What a flush leaves over goes back into Redis, where a group it fills is batched FULL.
  area.groupings.push(w);
  noteChange(m, 'flush', res);
  if (res.status === 409 && res.body.code === 'NOTHING_WAITING') return;
  const b = res.body;
  const what = `flush ${area.code} as ${area.client}`;
  const listed = Array.isArray(b.parcels) ? (b.parcels as string[]) : [];
  const sizes = versionsAt(area, Date.parse(String(b.createdAt))).map((v) => v.size);
  if (res.status !== 200 || b.reason !== 'MANUAL' || b.area !== area.code || listed.length < 1) fail(what, res);
  if (listed.length > Math.max(...sizes)) fail(`${what}: ${listed.length} parcels, above the area's size ${sizes.join(' or ')}`, res);
  const id = String(b.id);
  noteBatch(m, id, area.client, what, res);
  for (const t of listed) {
    const p = parcelOf(m, area.client, t);
    const key = keyOf({ client: area.client, trackingNo: t });
    // A parcel of an intake still under way (a flush racing it): learnt when that intake answers.
    if (!p && m.intaking?.has(key)) {
      (m.batchedEarly ??= new Map()).set(key, id);
      continue;
    }
    if (p?.movedTo !== undefined && p.movedTo === area.code) p.area = p.movedTo;
    if (!p || p.area !== area.code) fail(`${what}: ${t} is no parcel of the area`, res);
    if (p.withdrawn === 'yes') fail(`${what}: ${t} was answered WITHDRAWN`, res);
    if (p.batchId && p.batchId !== id) fail(`${what}: ${t} was seen in batch ${p.batchId}`, res);
    p.batchId = id;
  }
  const seen: SeenBatch = {
    area: area.code,
    vehiclePlate: String(b.vehiclePlate),
    reason: 'MANUAL',
    parcels: [...listed].sort(),
    createdAt: String(b.createdAt),
  };
  m.seen.set(id, seen);
}

/** POST /parcels/:trackingNo/withdraw as its client: 200 WITHDRAWN (never once seen in a batch), or 409 ALREADY_BATCHED. */
async function withdrawParcel(m: Model, r: Real, p: Parcel): Promise<void> {
  const before = p.withdrawn;
  p.withdrawn = before ?? 'maybe'; // a read meanwhile may see it WITHDRAWN
  const res = await r.world.httpAs(p.client).send('POST', `/parcels/${p.trackingNo}/withdraw`);
  noteChange(m, 'withdraw', res);
  if (res.status === 200) {
    if (res.body.status !== 'WITHDRAWN') fail(`withdraw ${p.trackingNo} as ${p.client}`, res);
    observeParcel(m, p, res, 'withdraw', true);
  } else if (res.status === 409 && res.body.code === 'ALREADY_BATCHED') {
    if (before === 'yes') fail(`withdraw ${p.trackingNo} as ${p.client}: BATCHED after it was answered WITHDRAWN`, res);
    if (p.withdrawn === 'maybe') delete p.withdrawn;
  } else fail(`withdraw ${p.trackingNo} as ${p.client}`, res);
}

/** POST /parcels/:trackingNo/move to another area of its client: 200 in the new area (arrival kept), or 409 as it is. */
async function moveParcel(m: Model, r: Real, p: Parcel, to: Area): Promise<void> {
  p.movedTo = to.code;
  const res = await r.world.httpAs(p.client).send('POST', `/parcels/${p.trackingNo}/move`, { area: to.code });
  const w = windowOf(res);
  to.groupings.push(w);
  noteChange(m, 'move', res);
  const what = `move ${p.trackingNo} of ${p.area} to ${to.code} as ${p.client}`;
  if (res.status === 200) {
    if (res.body.area !== to.code || Date.parse(String(res.body.createdAt)) !== p.createdAt) fail(`${what}: area or arrival`, res);
    p.area = to.code;
    p.moved = true;
    delete p.movedTo;
    observeParcel(m, p, res, 'move', true);
    if (p.batchId && res.body.status === 'BATCHED' && !p.fullIn) p.fullIn = w;
    return;
  }
  delete p.movedTo;
  if (res.status === 409 && res.body.code === 'ALREADY_BATCHED') {
    if (p.withdrawn === 'yes') fail(`${what}: BATCHED after it was answered WITHDRAWN`, res);
  } else if (res.status === 409 && res.body.code === 'PARCEL_WITHDRAWN') {
    if (!p.withdrawn || p.batchId) fail(`${what}: WITHDRAWN, never asked to be (or seen in a batch)`, res);
    p.withdrawn = 'yes';
  } else fail(what, res);
}

abstract class OnArea extends OnPick<Model, Area> {
  protected list(m: Readonly<Model>) {
    return m.areas;
  }
}

/** PUT of an area with a rule of its own (or back to the defaults), its vehicle as it was: applied to what waits. */
export class SetAreaRule extends OnArea {
  constructor(
    pick: number,
    readonly size: (typeof RULE_SIZES)[number],
    readonly waitS: (typeof RULE_WAITS_S)[number],
  ) {
    super(pick);
  }
  async act(m: Model, r: Real) {
    const area = this.picked(m);
    const plate = (area.versions.at(-1) as { plate: string }).plate;
    // A rule applies to what waits: one parcel is taken in first when none waits (a group of size 1 keeps none).
    if ((await waitingCount(r, area)) === 0) await intake(m, r, area, trackingOf(r, parcelsOf(m, area.client)));
    await putArea(m, r, area.client, area.index, plate, { batchSize: this.size, maxWaitSeconds: this.waitS });
    m.changes.rules = (m.changes.rules ?? 0) + 1;
    await checkDeadline(m, r, area, `${this}`);
  }
  toString() {
    return `SetAreaRule(${this.pick}, ${this.size}, ${this.waitS})`;
  }
}

export class Flush extends OnArea {
  async act(m: Model, r: Real) {
    await flushArea(m, r, this.picked(m));
  }
  toString() {
    return `Flush(${this.pick})`;
  }
}

export class Withdraw extends OnParcel {
  async act(m: Model, r: Real) {
    await withdrawParcel(m, r, this.parcel(m));
  }
  toString() {
    return `Withdraw(${this.pick})`;
  }
}

export class Move extends OnParcel {
  constructor(
    pick: number,
    readonly target: number,
  ) {
    super(pick);
  }
  override check(m: Readonly<Model>) {
    return m.parcels.some((p) => m.areas.some((a) => a.client === p.client && a.code !== p.area));
  }
  /** Another area of the parcel's client, by `target`. */
  protected targetOf(m: Model, p: Parcel): Area | undefined {
    const others = m.areas.filter((a) => a.client === p.client && a.code !== p.area);
    return others[this.target % Math.max(1, others.length)];
  }
  async act(m: Model, r: Real) {
    const p = this.parcel(m);
    const to = this.targetOf(m, p);
    if (to) await moveParcel(m, r, p, to);
  }
  toString() {
    return `Move(${this.pick}, ${this.target})`;
  }
}

/**
 * On one area at once: `n` new parcels (the FULL add), a manual flush and
 * the withdraw of its oldest parcel still waiting (by the model): a flush
 * racing the FULL add, a withdraw racing both.
 */
export class FlushRace extends OnArea {
  constructor(
    pick: number,
    readonly n: number,
  ) {
    super(pick);
  }
  async act(m: Model, r: Real) {
    const area = this.picked(m);
    const base = parcelsOf(m, area.client);
    const waiting = m.parcels.find((p) => p.client === area.client && p.area === area.code && !p.batchId && !p.withdrawn);
    const calls: Promise<void>[] = Array.from({ length: this.n }, (_, k) => intake(m, r, area, trackingOf(r, base + k)));
    calls.push(flushArea(m, r, area));
    if (waiting) calls.push(withdrawParcel(m, r, waiting));
    await Promise.all(calls);
  }
  toString() {
    return `FlushRace(${this.pick}, ${this.n})`;
  }
}
