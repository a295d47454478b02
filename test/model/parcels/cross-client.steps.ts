// The parcels model suite's cross-client steps: the client that does not own
// an area, parcel or batch reads it, takes a parcel in under an area code it
// has no area of, and puts an area of its own under the owner's code. Another
// client's object is answered exactly as an unknown one (404 or 422 with the
// same body but for the id), the caller's own of the same code or tracking
// number as its own, and nothing of the owner's changes.
import { randomBytes, randomUUID } from 'node:crypto';
import type { Reply } from '../../chaos/drivers/http.js';
import { OnPick, type Real, Step } from '../runner.js';
import type { ModelClient, World } from '../world.js';
import { versionsAt } from './checks.js';
import { putArea } from './intake.steps.js';
import { AREAS, type Area, type Model, PLATES, type Parcel, areaOf, fail, observeParcel, otherClient, parcelOf } from './model.js';

/** Each world's answer to a request about an id nothing has, by request, its id taken out. */
const unknownAnswers = new WeakMap<World, Map<string, string>>();

/** `body` with `id` taken out wherever it is named: answers about two ids compared as one. */
const withoutId = (body: unknown, id: string) => JSON.stringify(body).replaceAll(id, '<id>');

/** A new id of a kind nothing has: an area code (1..32 of [A-Za-z0-9_-]), a tracking number or a batch id. */
const unknownId: Record<'code' | 'trackingNo' | 'batch', () => string> = {
  code: () => `nx${randomBytes(8).toString('hex')}`,
  trackingNo: () => `nx-${randomUUID()}`,
  batch: () => randomUUID(),
};

/** Another client's request about `id`, and what it must be answered: as `request` about an `kind` id nothing has. */
type Foreign = { request: string; what: string; kind: keyof typeof unknownId; id: string; status: number; code: string };

/**
 * Holds the answer to another client's request (`send`: that request for a
 * given id; `pick`: the part of the answer judged) to the rule: its status
 * and code, and the same body as for an id of that kind nothing has.
 */
async function asUnknown(r: Real, f: Foreign, send: (id: string) => Promise<Reply>, pick: (res: Reply) => unknown = (res) => res.body): Promise<void> {
  const res = await send(f.id);
  const judged = pick(res) as { code?: unknown } | undefined;
  if (res.status !== f.status || judged?.code !== f.code) fail(f.what, res);
  const known = unknownAnswers.get(r.world) ?? new Map<string, string>();
  unknownAnswers.set(r.world, known);
  let unknown = known.get(f.request);
  if (unknown === undefined) {
    const other = unknownId[f.kind]();
    unknown = withoutId(pick(await send(other)), other);
    known.set(f.request, unknown);
  }
  if (withoutId(judged, f.id) !== unknown) fail(`${f.what}: not the answer to an unknown id (${unknown})`, res);
}

/**
 * A parcel read by the other client: its own of that tracking number if it
 * has one, else as an unknown one. `shared`: one whose number it has (when
 * there is one), else one whose number it has not.
 */
export class ForeignReadParcel extends OnPick<Model, Parcel> {
  constructor(
    pick: number,
    readonly shared: boolean,
  ) {
    super(pick);
  }
  protected list(m: Readonly<Model>) {
    const some = m.parcels.filter((p) => !!parcelOf(m, otherClient(p.client), p.trackingNo) === this.shared);
    return some.length > 0 ? some : m.parcels;
  }
  async act(m: Model, r: Real) {
    const p = this.picked(m);
    const as = otherClient(p.client);
    const http = r.world.httpAs(as);
    const own = parcelOf(m, as, p.trackingNo);
    const send = (t: string) => http.send('GET', `/parcels/${t}`);
    if (own) {
      const res = await send(p.trackingNo);
      if (res.status !== 200) fail(`get ${p.trackingNo} as ${as}, which has its own`, res);
      observeParcel(m, own, res, 'get of a tracking number both clients have', true);
      m.foreign.own++;
      return;
    }
    const what = `get ${p.trackingNo} (of ${p.client}) as ${as}`;
    await asUnknown(r, { request: 'get parcel', what, kind: 'trackingNo', id: p.trackingNo, status: 404, code: 'PARCEL_NOT_FOUND' }, send);
    m.foreign.unknown++;
  }
  toString() {
    return `ForeignReadParcel(${this.pick}, ${this.shared ? 'shared' : 'own'})`;
  }
}

/**
 * An area read by the other client: its own of that code if it has one, else
 * as an unknown one. `shared`: one whose code it has (when there is one),
 * else one whose code it has not.
 */
export class ForeignReadArea extends OnPick<Model, Area> {
  constructor(
    pick: number,
    readonly shared: boolean,
  ) {
    super(pick);
  }
  protected list(m: Readonly<Model>) {
    const some = m.areas.filter((a) => !!areaOf(m, otherClient(a.client), a.code) === this.shared);
    return some.length > 0 ? some : m.areas;
  }
  async act(m: Model, r: Real) {
    const a = this.picked(m);
    const as = otherClient(a.client);
    const http = r.world.httpAs(as);
    const own = areaOf(m, as, a.code);
    const send = (code: string) => http.send('GET', `/areas/${code}`);
    if (own) {
      const res = await send(a.code);
      const b = res.body;
      if (res.status !== 200 || b.code !== a.code || !versionsAt(own, Date.now()).some((v) => v.plate === b.vehiclePlate && v.contact === b.sorterContact))
        fail(`get area ${a.code} as ${as}: its own is ${JSON.stringify(own.versions.at(-1))}`, res);
      m.foreign.own++;
      return;
    }
    const what = `get area ${a.code} (of ${a.client}) as ${as}`;
    await asUnknown(r, { request: 'get area', what, kind: 'code', id: a.code, status: 404, code: 'AREA_NOT_FOUND' }, send);
    m.foreign.unknown++;
  }
  toString() {
    return `ForeignReadArea(${this.pick}, ${this.shared ? 'shared' : 'own'})`;
  }
}

/**
 * A batch read by the other client (as an unknown one), and the other
 * client's list of that area's batches (its own only): the batch of a parcel
 * seen batched, else of one read by its owner first, else one already seen.
 */
export class ForeignReadBatch extends OnPick<Model, Parcel> {
  protected list(m: Readonly<Model>) {
    const batched = m.parcels.filter((p) => p.batchId !== null);
    return batched.length > 0 ? batched : m.parcels;
  }
  async act(m: Model, r: Real) {
    const p = this.picked(m);
    if (!p.batchId) {
      const res = await r.world.httpAs(p.client).send('GET', `/parcels/${p.trackingNo}`);
      if (res.status !== 200) fail(`get ${p.trackingNo} as ${p.client}`, res);
      observeParcel(m, p, res, 'get', true);
    }
    const seen = [...m.batchIds];
    const [id, owner] = p.batchId ? [p.batchId, p.client] : (seen[this.pick % Math.max(1, seen.length)] ?? []);
    if (!id || !owner) return;
    const as = otherClient(owner);
    const http = r.world.httpAs(as);
    const what = `get batch ${id} (of ${owner}) as ${as}`;
    await asUnknown(r, { request: 'get batch', what, kind: 'batch', id, status: 404, code: 'BATCH_NOT_FOUND' }, (x) => http.send('GET', `/batches/${x}`));
    m.foreign.unknown++;
    const code = m.parcels.find((x) => x.client === owner && x.batchId === id)?.area ?? m.seen.get(id)?.area;
    if (!code) return;
    const res = await http.send('GET', `/batches?area=${code}`);
    const listed = res.body.batches as { id: string; area: string; parcels: string[] }[] | undefined;
    if (res.status !== 200 || !Array.isArray(listed)) fail(`list batches of ${code} as ${as}`, res);
    for (const b of listed) {
      const known = m.batchIds.get(b.id);
      if (known === owner || b.area !== code) fail(`list batches of ${code} as ${as}: batch ${b.id} (of ${String(known)})`, res);
      for (const t of b.parcels)
        if (parcelOf(m, as, t)?.area !== code) fail(`list batches of ${code} as ${as}: batch ${b.id} names ${t}, no parcel of ${as}'s ${code}`, res);
    }
  }
  toString() {
    return `ForeignReadBatch(${this.pick})`;
  }
}

/** Areas whose code the other client has no area of (yet). */
const unshared = (m: Readonly<Model>) => m.areas.filter((a) => !areaOf(m, otherClient(a.client), a.code));

/**
 * An area whose code only its client has: one of the run's (`pick`), else a
 * new one of `owner` put at an index past PutArea's (the others' codes being
 * both clients' by then).
 */
async function ownersOnly(m: Model, r: Real, pick: number, owner: ModelClient, plate: string): Promise<Area> {
  const some = unshared(m);
  if (some.length > 0) return some[pick % some.length] as Area;
  let index = AREAS;
  while (m.areas.some((a) => a.index === index)) index++;
  return putArea(m, r, owner, index, plate);
}

/**
 * The other client takes in a parcel (one by one, or in a batch request)
 * under the code of an area it has none of, and a tracking number of the
 * owner's parcel there when there is one: refused as for an unknown area (not
 * a conflict, not a repeat of the owner's), and nothing written.
 */
export class ForeignIntake extends Step<Model> {
  constructor(
    readonly pick: number,
    readonly batch: boolean,
    readonly owner: ModelClient,
  ) {
    super();
  }
  async act(m: Model, r: Real) {
    const a = await ownersOnly(m, r, this.pick, this.owner, PLATES[0]);
    const as = otherClient(a.client);
    const http = r.world.httpAs(as);
    // One it has no parcel of (its own would answer a conflict, rightly).
    const theirs = m.parcels.filter((x) => x.client === a.client && x.area === a.code && !parcelOf(m, as, x.trackingNo));
    const trackingNo = theirs[this.pick % Math.max(1, theirs.length)]?.trackingNo ?? `${r.tag}-u${m.refused.length}`;
    m.refused.push({ client: as, trackingNo });
    const request = this.batch ? 'batch intake' : 'intake';
    const f: Foreign = {
      request,
      what: `${request} of ${trackingNo} into ${a.code} (of ${a.client}) as ${as}`,
      kind: 'code',
      id: a.code,
      status: 422,
      code: 'UNKNOWN_AREA',
    };
    if (this.batch) {
      const send = (code: string) => http.send('POST', '/parcels/batch', { parcels: [{ trackingNo, area: code }] });
      await asUnknown(r, { ...f, status: 200 }, send, (res) => (res.body.results as { error?: unknown }[] | undefined)?.[0]?.error);
    } else await asUnknown(r, f, (code) => http.send('POST', '/parcels', { trackingNo, area: code }));
    const rows = await r.world.db.parcel.count({ where: { client: as, trackingNo } });
    if (rows !== 0) throw new Error(`${f.what}: refused, yet ${as} has a parcel ${trackingNo}`);
    m.foreign.refused++;
  }
  toString() {
    return `ForeignIntake(${this.pick}, ${this.batch ? 'batch' : 'one'}, ${this.owner})`;
  }
}

/**
 * The other client puts an area under the owner's code: its own new area (its
 * vehicle, its sorter), and the owner's keeps the vehicle and sorter contact
 * it had.
 */
export class ForeignPutArea extends Step<Model> {
  constructor(
    readonly pick: number,
    readonly plate: string,
    readonly owner: ModelClient,
  ) {
    super();
  }
  async act(m: Model, r: Real) {
    const a = await ownersOnly(m, r, this.pick, this.owner, this.plate);
    const as = otherClient(a.client);
    const mine = await putArea(m, r, as, a.index, this.plate);
    if (mine === a || mine.versions.length !== 1) throw new Error(`put area ${a.code} as ${as}: not a new area of ${as}`);
    const res = await r.world.httpAs(a.client).send('GET', `/areas/${a.code}`);
    const b = res.body;
    if (res.status !== 200 || !versionsAt(a, Date.now()).some((v) => v.plate === b.vehiclePlate && v.contact === b.sorterContact))
      fail(`get area ${a.code} as ${a.client} after ${as} put its own: was ${JSON.stringify(a.versions.at(-1))}`, res);
    m.foreign.put++;
  }
  toString() {
    return `ForeignPutArea(${this.pick}, ${this.plate}, ${this.owner})`;
  }
}
