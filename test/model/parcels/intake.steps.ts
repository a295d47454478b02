// The parcels model suite's writing steps, each as one of the clients: areas
// put (vehicle and sorter contact), parcels taken in one by one, in bursts,
// in batch requests, repeated, conflicting and for an unknown area.
import type { Reply } from '../../chaos/drivers/http.js';
import { OnPick, type Real, Step } from '../runner.js';
import { checkDeadline } from './groups.probe.js';
import type { ModelClient } from '../world.js';
import {
  type Area,
  MAX_WAIT_MS,
  type Model,
  type Parcel,
  SIZE,
  areaOf,
  codeOf,
  fail,
  keyOf,
  observeParcel,
  parcelsOf,
  trackingOf,
  windowOf,
  within,
} from './model.js';

/** An area's own rule as PUT sends it; absent: the defaults. */
export type Rule = { batchSize: number | null; maxWaitSeconds: number | null };

/**
 * PUTs `client`'s area of `index` (a new one, or a new version of it) with
 * `rule` (none: the defaults); returns it, in the model. The PUT's window
 * counts as a grouping of the area: a rule change batches what it makes full.
 */
export async function putArea(m: Model, r: Real, client: ModelClient, index: number, plate: string, rule?: Rule): Promise<Area> {
  const known = m.areas.find((a) => a.client === client && a.index === index);
  const code = codeOf(r, index);
  const contact = `sorter${++m.versions}@${r.tag}.example`;
  const res = await r.world.httpAs(client).send('PUT', `/areas/${code}`, { vehiclePlate: plate, sorterContact: contact, ...rule });
  const b = res.body;
  if (res.status !== 200 || b.code !== code || b.vehiclePlate !== plate || b.sorterContact !== contact) fail(`put area ${code} as ${client}`, res);
  if (b.batchSize !== (rule?.batchSize ?? null) || b.maxWaitSeconds !== (rule?.maxWaitSeconds ?? null)) fail(`put area ${code} as ${client}: its rule`, res);
  const area = known ?? { client, index, code, versions: [], groupings: [] };
  if (!known) m.areas.push(area);
  const size = rule?.batchSize ?? SIZE;
  const waitMs = rule?.maxWaitSeconds != null ? rule.maxWaitSeconds * 1_000 : MAX_WAIT_MS;
  area.versions.push({ plate, contact, size, waitMs, ...windowOf(res) });
  area.groupings.push(windowOf(res));
  return area;
}

export class PutArea extends Step<Model> {
  constructor(
    readonly index: number,
    readonly plate: string,
    readonly as: ModelClient,
  ) {
    super();
  }
  async act(m: Model, r: Real) {
    await putArea(m, r, this.as, this.index, this.plate);
  }
  toString() {
    return `PutArea(${this.index}, ${this.plate}, ${this.as})`;
  }
}

/** POSTs a new parcel of the area's client: 202, or 200 when a first attempt wrote it and the answer was lost. */
export async function intake(m: Model, r: Real, area: Area, trackingNo: string): Promise<void> {
  const key = keyOf({ client: area.client, trackingNo });
  (m.intaking ??= new Set()).add(key);
  const res = await r.world
    .httpAs(area.client)
    .send('POST', '/parcels', { trackingNo, area: area.code })
    .finally(() => m.intaking?.delete(key));
  area.groupings.push(windowOf(res));
  const fresh = res.status === 202;
  if (!fresh && !(res.status === 200 && res.attempts > 1)) fail(`intake ${trackingNo} as ${area.client}`, res);
  const createdAt = Date.parse(String(res.body.createdAt));
  if (!within(createdAt, { from: res.firstSentAt, to: res.receivedAt })) fail(`intake ${trackingNo}: arrival outside its request`, res);
  const p: Parcel = { client: area.client, trackingNo, area: area.code, createdAt, batchId: null, fullIn: null };
  m.parcels.push(p);
  // The 202 of a parcel that completed a batch says BATCHED before its row is re-read (batchedAt not given).
  observeParcel(m, p, res, 'intake', !fresh);
  if (fresh && p.batchId) p.fullIn = windowOf(res);
  // A flush that raced this intake answered the parcel in its batch before the intake answered.
  const early = m.batchedEarly?.get(key);
  if (early !== undefined) {
    m.batchedEarly?.delete(key);
    if (p.batchId && p.batchId !== early) fail(`intake ${trackingNo}: in batch ${p.batchId}, and a flush answered it in ${early}`, res);
    p.batchId = early;
  }
}

abstract class OnArea extends OnPick<Model, Area> {
  protected list(m: Readonly<Model>) {
    return m.areas;
  }
  area(m: Model): Area {
    return this.picked(m);
  }
}

export class Intake extends OnArea {
  constructor(
    pick: number,
    readonly n: number,
  ) {
    super(pick);
  }
  async act(m: Model, r: Real) {
    const area = this.area(m);
    for (let k = 0; k < this.n; k++) await intake(m, r, area, trackingOf(r, parcelsOf(m, area.client)));
    await checkDeadline(m, r, area, `${this}`);
  }
  toString() {
    return `Intake(${this.pick}, ${this.n})`;
  }
}

/** Intakes to one area sent together: the FULL path raced against itself. */
export class Burst extends OnArea {
  constructor(
    pick: number,
    readonly n: number,
  ) {
    super(pick);
  }
  async act(m: Model, r: Real) {
    const area = this.area(m);
    const base = parcelsOf(m, area.client);
    await Promise.all(Array.from({ length: this.n }, (_, k) => intake(m, r, area, trackingOf(r, base + k))));
  }
  toString() {
    return `Burst(${this.pick}, ${this.n})`;
  }
}

/**
 * POST /parcels/batch as the area's client: `n` new parcels for the area,
 * then (when the model has them) a repeat of a known parcel of that client
 * and a conflicting one, and one for an unknown area, each answered in its
 * place. A request retried by the driver may find its new parcels written by
 * the attempt given up on (created false).
 */
export class BatchIntake extends OnArea {
  constructor(
    pick: number,
    readonly n: number,
    readonly other: number,
  ) {
    super(pick);
  }
  async act(m: Model, r: Real) {
    const area = this.area(m);
    const { client } = area;
    const base = parcelsOf(m, client);
    const fresh = Array.from({ length: this.n }, (_, k) => trackingOf(r, base + k));
    const mine = m.parcels.filter((x) => x.client === client);
    const known = mine.length > 0 ? (mine[this.other % mine.length] as Parcel) : null;
    const elsewhere = known && m.areas.find((a) => a.client === client && a.code !== known.area);
    const unknown = `${r.tag}-u${m.refused.length}`;
    m.refused.push({ client, trackingNo: unknown });
    const asked = [
      ...fresh.map((trackingNo) => ({ trackingNo, area: area.code })),
      ...(known ? [{ trackingNo: known.trackingNo, area: known.area }] : []),
      ...(known && elsewhere ? [{ trackingNo: known.trackingNo, area: elsewhere.code }] : []),
      { trackingNo: unknown, area: `${r.tag}-none` },
    ];
    const res = await r.world.httpAs(client).send('POST', '/parcels/batch', { parcels: asked });
    area.groupings.push(windowOf(res));
    if (known) areaOf(m, client, known.area)?.groupings.push(windowOf(res));
    const results = res.body.results as Record<string, unknown>[] | undefined;
    if (res.status !== 200 || !Array.isArray(results) || results.length !== asked.length) fail(`batch intake as ${client}`, res);
    const at = (i: number): Reply => ({ ...res, body: results[i] as Record<string, unknown> });
    fresh.forEach((trackingNo, i) => {
      const one = at(i);
      const created = one.body.created;
      if (!(created === true || (created === false && res.attempts > 1))) fail(`batch intake ${trackingNo}: created`, one);
      const createdAt = Date.parse(String(one.body.createdAt));
      if (!within(createdAt, { from: res.firstSentAt, to: res.receivedAt })) fail(`batch intake ${trackingNo}: arrival outside its request`, one);
      const p: Parcel = { client, trackingNo, area: area.code, createdAt, batchId: null, fullIn: null };
      m.parcels.push(p);
      observeParcel(m, p, one, 'batch intake', true);
      if (created === true && p.batchId) p.fullIn = windowOf(res);
    });
    let i = fresh.length;
    if (known) {
      const one = at(i++);
      if (one.body.created !== false) fail(`batch intake: repeat of ${known.trackingNo}`, one);
      observeParcel(m, known, one, 'batch intake repeat', true);
    }
    if (known && elsewhere) {
      const code = (at(i++).body.error as { code?: string } | undefined)?.code;
      if (code !== 'TRACKING_NO_CONFLICT') fail(`batch intake of ${known.trackingNo} for ${elsewhere.code}`, at(i - 1));
    }
    if ((at(i).body.error as { code?: string } | undefined)?.code !== 'UNKNOWN_AREA') fail(`batch intake of ${unknown} for an unknown area`, at(i));
  }
  toString() {
    return `BatchIntake(${this.pick}, ${this.n}, ${this.other})`;
  }
}

export abstract class OnParcel extends OnPick<Model, Parcel> {
  protected list(m: Readonly<Model>) {
    return m.parcels;
  }
  parcel(m: Model): Parcel {
    return this.picked(m);
  }
}

export class RepeatIntake extends OnParcel {
  async act(m: Model, r: Real) {
    const p = this.parcel(m);
    const res = await r.world.httpAs(p.client).send('POST', '/parcels', { trackingNo: p.trackingNo, area: p.area });
    // A repeat of a parcel still waiting groups it again: it may complete a batch.
    areaOf(m, p.client, p.area)?.groupings.push(windowOf(res));
    if (res.status !== 200) fail(`repeated intake of ${p.trackingNo} as ${p.client}`, res);
    observeParcel(m, p, res, 'repeated intake', true);
  }
  toString() {
    return `RepeatIntake(${this.pick})`;
  }
}

/** A parcel posted again by its client for another of its areas (or an unknown one): 409, whatever the other client has. */
export class ConflictIntake extends OnParcel {
  async act(m: Model, r: Real) {
    const p = this.parcel(m);
    const others = m.areas.filter((a) => a.client === p.client && a.code !== p.area).map((a) => a.code);
    const other = others[this.pick % Math.max(1, others.length)] ?? `${r.tag}-none`;
    const res = await r.world.httpAs(p.client).send('POST', '/parcels', { trackingNo: p.trackingNo, area: other });
    if (res.status !== 409 || res.body.code !== 'TRACKING_NO_CONFLICT') fail(`intake of ${p.trackingNo} for ${other} as ${p.client}`, res);
  }
  toString() {
    return `ConflictIntake(${this.pick})`;
  }
}

export class IntakeUnknownArea extends Step<Model> {
  constructor(readonly as: ModelClient) {
    super();
  }
  async act(m: Model, r: Real) {
    const trackingNo = `${r.tag}-u${m.refused.length}`;
    m.refused.push({ client: this.as, trackingNo });
    const res = await r.world.httpAs(this.as).send('POST', '/parcels', { trackingNo, area: `${r.tag}-none` });
    if (res.status !== 422 || res.body.code !== 'UNKNOWN_AREA') fail(`intake of ${trackingNo} for an unknown area as ${this.as}`, res);
  }
  toString() {
    return `IntakeUnknownArea(${this.as})`;
  }
}
