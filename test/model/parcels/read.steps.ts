// The parcels model suite's reading steps: a parcel and a batch read back by
// their client and held to what the model saw of them.
import { type Real, Step } from '../runner.js';
import type { ModelClient } from '../world.js';
import { OnParcel } from './intake.steps.js';
import { type Model, type SeenBatch, areaOf, fail, observeParcel, parcelOf, versionsAt } from './model.js';

export class ReadParcel extends OnParcel {
  async act(m: Model, r: Real) {
    const p = this.parcel(m);
    const res = await r.world.httpAs(p.client).send('GET', `/parcels/${p.trackingNo}`);
    if (res.status !== 200) fail(`get ${p.trackingNo} as ${p.client}`, res);
    observeParcel(m, p, res, 'get', true);
  }
  toString() {
    return `ReadParcel(${this.pick})`;
  }
}

export class ReadBatch extends Step<Model> {
  constructor(readonly pick: number) {
    super();
  }
  override check(m: Readonly<Model>) {
    return m.batchIds.size > 0;
  }
  async act(m: Model, r: Real) {
    const [id, client] = [...m.batchIds][this.pick % m.batchIds.size] as [string, ModelClient];
    const res = await r.world.httpAs(client).send('GET', `/batches/${id}`);
    const b = res.body;
    const what = `get batch ${id} as ${client}`;
    const listed = Array.isArray(b.parcels) ? (b.parcels as string[]) : [];
    const area = areaOf(m, client, String(b.area));
    // The area's sizes that may have been current when the batch was made.
    const sizes = area ? versionsAt(area, Date.parse(String(b.createdAt))).map((v) => v.size) : [];
    if (res.status !== 200 || b.id !== id || listed.length < 1 || listed.length > Math.max(...sizes)) fail(what, res);
    if (!['TIMEOUT', 'MANUAL', 'FULL'].includes(String(b.reason)) || (b.reason === 'FULL' && !sizes.includes(listed.length)))
      fail(`${what}: reason and size (${sizes.join(' or ')})`, res);
    for (const p of m.parcels) if (p.batchId === id && !listed.includes(p.trackingNo)) fail(`${what}: ${p.trackingNo} (of ${p.client}) was seen in it`, res);
    for (const t of listed) {
      const p = parcelOf(m, client, t);
      if (p?.movedTo !== undefined && p.movedTo === b.area) p.area = p.movedTo;
      if (!p || p.area !== b.area) fail(`${what}: ${t} is no parcel of ${client}'s area ${String(b.area)} of this run`, res);
      if (p.withdrawn === 'yes') fail(`${what}: ${t} was answered WITHDRAWN`, res);
      if (p.batchId && p.batchId !== id) fail(`${what}: ${t} was seen in batch ${p.batchId}`, res);
      p.batchId = id;
    }
    const seen: SeenBatch = {
      area: String(b.area),
      vehiclePlate: String(b.vehiclePlate),
      reason: String(b.reason),
      parcels: [...listed].sort(),
      createdAt: String(b.createdAt),
    };
    const before = m.seen.get(id);
    if (before && JSON.stringify(before) !== JSON.stringify(seen)) fail(`${what}: was ${JSON.stringify(before)}`, res);
    m.seen.set(id, seen);
  }
  toString() {
    return `ReadBatch(${this.pick})`;
  }
}
