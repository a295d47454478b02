// The parcels model suite's model: what the suite knows of its areas, parcels
// and batches (each of one of the world's clients: two clients have areas of
// the same codes and parcels of the same tracking numbers, each its own), the
// timing bounds its rules allow, and how an answer is checked against it
// (observeParcel). The steps change it; the checks compare it.
import type { Reply } from '../../chaos/drivers/http.js';
import { MODEL_CLIENTS, MODEL_TIMINGS, type ModelClient } from '../world.js';
import { EPS_MS, type Real, SETTLE_MS, fail } from '../runner.js';

// Shared by every suite (runner.ts); here so the steps and checks import their model from one place.
export { EPS_MS, SETTLE_MS, fail };
export const SIZE = MODEL_TIMINGS.PARCEL_BATCH_SIZE;
export const MAX_WAIT_MS = MODEL_TIMINGS.PARCEL_MAX_WAIT_MS;
/** Without faults no parcel waits longer than the maximum wait plus this (reconciliation interval, grace and some). */
export const WAIT_SLACK_MS = 3_000;
/**
 * ...and the flusher makes a TIMEOUT batch within this of its deadline (it
 * takes some 10 ms): later, the batch was the reconciliation pass's work
 * (grace 1 s), the flusher having missed it. Checked only when neither this run
 * nor the one before had a fault (a connection silenced at the end of the last
 * run can hold the flusher up for its take timeout).
 */
export const FLUSH_SLACK_MS = 1_000;
/**
 * How long after a fault the flusher may still be held up by it: a silenced
 * connection is found dead by the next take's timeout (2 s, after an idle
 * re-check of 0.5 s), a restarted Redis is reached again within the
 * reconnect backoff (2 s at most), a killed worker starts again beside the
 * other worker's flusher (some seconds of CPU).
 */
export const LINGER_MS = 4_000;
export const PLATES = ['KA-101', 'KA-202', 'KB-303', 'KC-404', 'KD-505'] as const;
/** Area codes per run at most (PutArea's indices); each client may have an area of each. */
export const AREAS = 4;

/** When a request's effect may happen: between its send and its answer; an attempt given up on may act later still. */
type Window = { from: number; to: number };
/** A PUT of an area: its vehicle, sorter contact and rule (the service's defaults when the PUT gave none). */
export type Version = Window & { plate: string; contact: string; size: number; waitMs: number };
/** The rules an area may get (SetAreaRule): sizes and waits around the defaults; null: the default. */
export const RULE_SIZES = [1, 2, 3, null] as const;
export const RULE_WAITS_S = [1, 2, 3, null] as const;
/** The longest wait any area of the suite has. */
export const LONGEST_WAIT_MS = Math.max(MAX_WAIT_MS, 3_000);
/** An area of one client: `code` (of its index) is the same for both clients' areas of one index. */
/** `groupings`: requests that may batch the area FULL (intakes, rule changes, moves in, flushes' put-backs); `flushes`: its flushes. */
export type Area = { client: ModelClient; index: number; code: string; versions: Version[]; groupings: Window[]; flushes?: Window[] };
export type Parcel = {
  client: ModelClient;
  trackingNo: string;
  area: string;
  createdAt: number;
  batchId: string | null;
  fullIn: Window | null;
  /** Withdrawn: answered so ('yes'), or asked without a clear answer ('maybe': it may or may not be). */
  withdrawn?: 'yes' | 'maybe';
  /** Asked to move (to `movedTo`) without a clear answer: its area is either. */
  movedTo?: string;
  /** Moved at least once: its batch may be judged by another area's wait than where it arrived. */
  moved?: boolean;
};
/** A stray entry of a parcel its area's wait counted from, planted into another area's group. */
type Stray = { client: ModelClient; trackingNo: string; into: string };
export type SeenBatch = { area: string; vehiclePlate: string; reason: string; parcels: string[]; createdAt: string };
/** A parcel (client, tracking number) refused: no row of it unless the model took it in later. */
export type Refused = { client: ModelClient; trackingNo: string };
export type Model = {
  areas: Area[];
  parcels: Parcel[];
  refused: Refused[];
  /** Every batch answered or read, with the client it was answered to. */
  batchIds: Map<string, ModelClient>;
  seen: Map<string, SeenBatch>;
  versions: number;
  /** Stray entries planted; the aimed ones (of the parcel its area's wait counted from) listed. */
  strays: number;
  aimed: Stray[];
  /** Tracking numbers both clients took in at once, into their areas of one code. */
  twins: string[];
  /** The other client's requests, by what they were answered. */
  foreign: { unknown: number; own: number; refused: number; put: number };
  /** Area rule changes, flushes, withdraws and moves, by what they were answered (status). */
  changes: Record<string, number>;
  /** Looks into the service's Redis groups (groups.probe.ts), by what they judged or why they did not. */
  looks: Record<string, number>;
  /** Intakes under way (parcel keys): a flush racing one may batch its parcel before the intake answers. */
  intaking?: Set<string>;
  /** Parcels of intakes under way that a flush answered in its batch (key -> batch id), learnt when the intake answers. */
  batchedEarly?: Map<string, string>;
};

export const newModel = (): Model => ({
  areas: [],
  parcels: [],
  refused: [],
  batchIds: new Map(),
  seen: new Map(),
  versions: 0,
  strays: 0,
  aimed: [],
  twins: [],
  foreign: { unknown: 0, own: 0, refused: 0, put: 0 },
  changes: {},
  looks: {},
});

/** The client that is not `c`. */
export function otherClient(c: ModelClient): ModelClient {
  return MODEL_CLIENTS.find((x) => x !== c) as ModelClient;
}

export const areaOf = (m: Readonly<Model>, client: string, code: string): Area | undefined => m.areas.find((a) => a.client === client && a.code === code);
export const parcelOf = (m: Readonly<Model>, client: string, trackingNo: string): Parcel | undefined =>
  m.parcels.find((x) => x.client === client && x.trackingNo === trackingNo);
/** A parcel's key: a client id holds no '/'. */
export const keyOf = (x: { client: string; trackingNo: string }) => `${x.client}/${x.trackingNo}`;

/** The code of the areas of `index` in run `r` (both clients'). */
export const codeOf = (r: Real, index: number) => `${r.tag}-a${index}`;
/** The `n`th tracking number of a client's own sequence: both clients' run p0, p1, ... (the same numbers, each its own). */
export const trackingOf = (r: Real, n: number) => `${r.tag}-p${n}`;
export const parcelsOf = (m: Readonly<Model>, client: ModelClient) => m.parcels.filter((x) => x.client === client).length;

export const windowOf = (res: Reply): Window => ({ from: res.firstSentAt, to: res.attempts > 1 ? Number.POSITIVE_INFINITY : res.receivedAt });
export const within = (t: number, w: Window) => t >= w.from - EPS_MS && t <= w.to + EPS_MS;

/** Notes batch `id` as answered to `client`: a batch is one client's. */
export function noteBatch(m: Model, id: string, client: ModelClient, what: string, res: Reply): void {
  const known = m.batchIds.get(id);
  if (known && known !== client) fail(`${what}: batch ${id} of ${known} answered to ${client}`, res);
  m.batchIds.set(id, client);
}

/** Counts a change's answer in the model (`what` and its status). */
export const noteChange = (m: Model, what: string, res: Reply) => void (m.changes[`${what} ${res.status}`] = (m.changes[`${what} ${res.status}`] ?? 0) + 1);

/**
 * The area's versions (vehicle, sorter contact and rule together) that may
 * have been current at database time `t`: made no later than `t`, and not
 * yet replaced (the next one's request may still have been under way), or
 * one whose request was retried (an attempt given up on may have written it late).
 */
export function versionsAt(area: Area, t: number): Version[] {
  return area.versions.filter((v, k) => {
    const next = area.versions[k + 1];
    return v.from <= t + EPS_MS && (!next || next.to >= t - EPS_MS || v.to === Number.POSITIVE_INFINITY);
  });
}

/** Checks a parcel answer (to its client) against the model and learns its batch. `batchedAt`: the answer carries the row's batchedAt. */
export function observeParcel(m: Model, p: Parcel, res: Reply, what: string, batchedAt: boolean): void {
  const b = res.body;
  what = `${what} (as ${p.client})`;
  if (b.trackingNo !== p.trackingNo || (b.area !== p.area && b.area !== p.movedTo)) fail(`${what} ${p.trackingNo} of ${p.area}`, res);
  if (Date.parse(String(b.createdAt)) !== p.createdAt) fail(`${what} ${p.trackingNo}: arrival was ${new Date(p.createdAt).toISOString()}`, res);
  if (b.status === 'BATCHED') {
    if (typeof b.batchId !== 'string' || (batchedAt && typeof b.batchedAt !== 'string')) fail(`${what} ${p.trackingNo}: BATCHED`, res);
    if (p.batchId && p.batchId !== b.batchId) fail(`${what} ${p.trackingNo}: was seen in batch ${p.batchId}`, res);
    p.batchId = b.batchId;
    noteBatch(m, b.batchId, p.client, `${what} ${p.trackingNo}`, res);
    if (p.withdrawn === 'yes') fail(`${what} ${p.trackingNo}: BATCHED after it was answered WITHDRAWN`, res);
  } else if (b.status === 'WAITING') {
    if (b.batchId !== null || (batchedAt && b.batchedAt !== null)) fail(`${what} ${p.trackingNo}: WAITING`, res);
    if (p.batchId) fail(`${what} ${p.trackingNo}: WAITING again after it was seen in batch ${p.batchId}`, res);
    if (p.withdrawn === 'yes') fail(`${what} ${p.trackingNo}: WAITING after it was answered WITHDRAWN`, res);
  } else if (b.status === 'WITHDRAWN') {
    if (b.batchId !== null || !p.withdrawn) fail(`${what} ${p.trackingNo}: WITHDRAWN, never asked to be (or in a batch)`, res);
    if (p.batchId) fail(`${what} ${p.trackingNo}: WITHDRAWN after it was seen in batch ${p.batchId}`, res);
    p.withdrawn = 'yes';
  } else fail(`${what} ${p.trackingNo}: status`, res);
  if (b.area === p.movedTo) {
    p.area = String(b.area);
    delete p.movedTo;
  }
}
