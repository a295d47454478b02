// The parcels model suite's rules once a run has settled: each compares the
// database rows and the receiver's calls with the model and adds what
// disagrees to the run's problems. A row is its client's: parcels are matched
// by (client, tracking number), areas by (client, code), and no batch,
// parcel or notice of one client may show anything of the other's.
import { type Real, type problems, repeatExplained } from '../runner.js';
import type { FaultSpan, World } from '../world.js';
import {
  EPS_MS,
  FLUSH_SLACK_MS,
  LINGER_MS,
  LONGEST_WAIT_MS,
  MAX_WAIT_MS,
  type Model,
  type Parcel,
  type SeenBatch,
  WAIT_SLACK_MS,
  areaOf,
  keyOf,
  parcelOf,
  versionsAt,
  within,
} from './model.js';

/** JSON equality regardless of key order (jsonb keeps its keys in an order of its own). */
function sameJson(a: unknown, b: unknown): boolean {
  const canon = (v: unknown): unknown =>
    v && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(
          Object.entries(v)
            .sort(([x], [y]) => x.localeCompare(y))
            .map(([k, w]) => [k, canon(w)]),
        )
      : v;
  return JSON.stringify(canon(a)) === JSON.stringify(canon(b));
}

export { versionsAt };

export type Db = World['db'];
type BatchRow = Awaited<ReturnType<Db['batch']['findMany']>>[number];
type ParcelRow = Awaited<ReturnType<Db['parcel']['findMany']>>[number];
type NoteRow = Awaited<ReturnType<Db['notification']['findMany']>>[number];
export type Sent = { id: string; recipient?: string | null; payload?: unknown };
type Problems = ReturnType<typeof problems>;
export type Counts = {
  parcels: number;
  batches: number;
  full: number;
  timeout: number;
  delivered: number;
  deliveredTwice: number;
  strays: number;
  /** Aimed strays, and those held to the rule of checkStrays (no fault near). */
  straysAimed: number;
  straysChecked: number;
  /** Parcels and batches of the second client; area codes both clients had. */
  otherClientParcels: number;
  otherClientBatches: number;
  sharedCodes: number;
  /** Tracking numbers both clients took in at once, and those of them batched by one statement for both (TIMEOUT batches made at one moment). */
  twins: number;
  twinsOneCommit: number;
  /** The other client's requests: answered as unknown, answered with its own, intakes refused, areas put under the owner's code. */
  foreignUnknown: number;
  foreignOwn: number;
  foreignRefused: number;
  foreignPut: number;
};

/**
 * Every accepted parcel has its row, of its client and area, BATCHED in one
 * batch of its own client and area; a refused one (client, tracking number)
 * has no row unless the model took that one in later (whose intake then
 * answered a new parcel).
 */
export function checkParcels(m: Model, rows: ParcelRow[], batches: Map<string, BatchRow>, p: Problems, faultless: boolean): void {
  const accepted = new Map(m.parcels.map((x) => [keyOf(x), x]));
  const refused = new Set(m.refused.map(keyOf));
  const byKey = new Map(rows.map((x) => [keyOf(x), x]));
  for (const k of refused) if (byKey.has(k) && !accepted.has(k)) p.add(`parcel ${k}: its intake was refused, yet it has a row`);
  for (const row of rows)
    if (!accepted.has(keyOf(row)) && !refused.has(keyOf(row))) p.add(`parcel ${keyOf(row)} of ${row.areaCode}: never accepted, yet it has a row`);
  for (const x of m.parcels) {
    const what = `parcel ${keyOf(x)}`;
    const row = byKey.get(keyOf(x));
    if (!row) {
      p.add(`${what} is gone`);
      continue;
    }
    // A move asked without a clear answer may or may not have happened.
    if (x.movedTo && row.areaCode === x.movedTo) x.area = x.movedTo;
    if (row.areaCode !== x.area || row.createdAt.getTime() !== x.createdAt) p.add(`${what}: now of ${row.areaCode} since ${row.createdAt.toISOString()}`);
    if (x.withdrawn === 'yes' || (x.withdrawn === 'maybe' && row.status === 'WITHDRAWN')) {
      // A withdrawn parcel ends in no batch (and was never seen in one).
      if (row.status !== 'WITHDRAWN' || row.batchId !== null || x.batchId) p.add(`${what}: withdrawn, yet ${row.status} in batch ${row.batchId ?? x.batchId}`);
      continue;
    }
    if (row.status === 'WITHDRAWN') p.add(`${what}: WITHDRAWN, never asked to be`);
    const batch = row.batchId ? batches.get(row.batchId) : undefined;
    if (row.status !== 'BATCHED' || !batch || !row.batchedAt) {
      p.add(`${what}: ${row.status} in batch ${row.batchId} (${batch ? 'of this run' : 'unknown'})`);
      continue;
    }
    if (batch.client !== x.client || batch.areaCode !== x.area) p.add(`${what} of ${x.area} in batch ${batch.id} of ${batch.client}'s ${batch.areaCode}`);
    if (x.batchId && x.batchId !== batch.id) p.add(`${what}: seen in batch ${x.batchId}, now in ${batch.id}`);
    if (row.batchedAt.getTime() !== batch.createdAt.getTime())
      p.add(`${what}: batched at ${row.batchedAt.toISOString()}, its batch made at ${batch.createdAt.toISOString()}`);
    if (x.fullIn && (batch.reason !== 'FULL' || !within(batch.createdAt.getTime(), x.fullIn)))
      p.add(`${what}: its intake answered it BATCHED, its batch ${batch.id} is ${batch.reason} made at ${batch.createdAt.toISOString()}`);
    const waited = row.batchedAt.getTime() - x.createdAt;
    if (faultless && waited > LONGEST_WAIT_MS + WAIT_SLACK_MS) p.add(`${what}: waited ${waited} ms without any fault in the run`);
  }
}

/**
 * A stray entry aimed at its parcel's deadline (planted while its area's wait
 * counted from it, before the deadline: the parcel was in its group) must not
 * cost the parcel its turn: it is batched, with its own area, by its deadline
 * + FLUSH_SLACK_MS. Held whatever else the run did (the lateness rules of
 * checkBatch ask a run without faults, and would seldom see a stray): excused
 * only by a fault, of this run or the last, from LINGER_MS before the
 * deadline to that time. Late, the flusher left the parcel to the
 * reconciliation pass.
 */
export function checkStrays(m: Model, rows: ParcelRow[], batches: Map<string, BatchRow>, spans: FaultSpan[], p: Problems, counts: Counts): void {
  for (const s of m.aimed) {
    const x = parcelOf(m, s.client, s.trackingNo) as Parcel;
    // Aimed at the default wait: a parcel moved, withdrawn, or of an area that had its own wait is judged by other rules.
    const home = areaOf(m, x.client, x.area);
    if (x.moved || x.withdrawn || !home || home.versions.some((v) => v.waitMs !== MAX_WAIT_MS)) continue;
    const deadline = x.createdAt + MAX_WAIT_MS;
    const due = deadline + FLUSH_SLACK_MS;
    if (spans.some((f) => f.from <= due && f.to >= deadline - LINGER_MS)) continue;
    counts.straysChecked++;
    const row = rows.find((y) => y.client === s.client && y.trackingNo === s.trackingNo);
    const batch = row?.batchId ? batches.get(row.batchId) : undefined;
    // Not batched, or batched elsewhere: checkParcels says so.
    if (batch && batch.createdAt.getTime() > due)
      p.add(
        `parcel ${keyOf(x)}, planted into ${s.into}'s group: batch ${batch.id} made ${batch.createdAt.getTime() - due} ms past its deadline + slack, no fault near`,
      );
  }
}

/**
 * A batch as the model says, of its client only: its parcels all of its
 * client and area, FULL at the batch size during an intake of that area
 * (the other client's intakes of its area of the same code do not count),
 * TIMEOUT no earlier than its first parcel's deadline, its vehicle and its
 * one notice's recipient a version of its own client's area, the notice its
 * client's.
 */
export function checkBatch(m: Model, b: BatchRow, members: ParcelRow[], notes: NoteRow[], p: Problems, prompt: boolean): void {
  const what = `batch ${b.id} of ${b.client} (${b.reason}, ${members.length} parcels, ${b.createdAt.toISOString()})`;
  const area = areaOf(m, b.client, b.areaCode);
  if (!area) {
    p.add(`${what}: of area ${b.areaCode}, which ${b.client} never put`);
    return;
  }
  const at = b.createdAt.getTime();
  const strangers = members.filter((x) => x.client !== b.client || x.areaCode !== b.areaCode);
  if (strangers.length) p.add(`${what} of ${b.areaCode}: holds ${strangers.map((x) => `${keyOf(x)} of ${x.areaCode}`).join(', ')}`);
  // The area's rule when the batch was made (one of the versions that may have been current).
  const rules = versionsAt(area, at);
  const sizes = rules.map((v) => v.size);
  const waits = rules.map((v) => v.waitMs);
  if (members.length !== b.parcelCount || members.length < 1 || members.length > Math.max(...sizes))
    p.add(`${what}: counts ${b.parcelCount}, its area's size was ${sizes.join(' or ')}`);
  if (b.reason === 'FULL') {
    if (!sizes.includes(members.length)) p.add(`${what}: FULL not at its area's batch size ${sizes.join(' or ')}`);
    // After a fault the reconciliation pass (parcels Redis lost, put back) and
    // a late add answer (committed after its intake answered) make FULL batches too.
    if (prompt && !area.groupings.some((w) => within(at, w))) p.add(`${what}: FULL, made outside every intake of ${area.code} without any fault`);
  } else if (b.reason === 'MANUAL') {
    if (!(area.flushes ?? []).some((w) => within(at, w))) p.add(`${what}: MANUAL, made outside every flush of ${area.code}`);
  } else if (members.length > 0) {
    const first = Math.min(...members.map((x) => x.createdAt.getTime()));
    const soonest = Math.min(...waits);
    const latest = Math.max(...waits);
    if (at < first + soonest - EPS_MS) p.add(`${what}: TIMEOUT ${first + soonest - at} ms before its first parcel's deadline`);
    // A parcel moved in late is due from when it came (its arrival kept): not held to the flusher's promptness.
    const movedIn = members.some((x) => parcelOf(m, x.client, x.trackingNo)?.moved);
    if (prompt && !movedIn && at > first + latest + FLUSH_SLACK_MS)
      p.add(`${what}: TIMEOUT ${at - first - latest} ms after its deadline, no fault: the flusher missed it`);
  }
  const seen = m.seen.get(b.id);
  const now: SeenBatch = {
    area: b.areaCode,
    vehiclePlate: b.vehiclePlate,
    reason: b.reason,
    parcels: members.map((x) => x.trackingNo).sort(),
    createdAt: b.createdAt.toISOString(),
  };
  if (seen && JSON.stringify(seen) !== JSON.stringify(now)) p.add(`${what}: read as ${JSON.stringify(seen)}, now ${JSON.stringify(now)}`);
  const note = notes.length === 1 ? notes[0] : undefined;
  for (const n of notes) if (n.client !== b.client) p.add(`${what}: notice ${n.id} is ${n.client}'s`);
  if (!note || note.kind !== 'BATCH_DISPATCHED') {
    p.add(`${what}: ${notes.length} notices (${notes.map((n) => n.kind).join(', ')})`);
    if (!versionsAt(area, at).some((v) => v.plate === b.vehiclePlate)) p.add(`${what}: vehicle ${b.vehiclePlate} was not ${b.client}'s ${area.code}'s then`);
    return;
  }
  const versions = versionsAt(area, at);
  if (!versions.some((v) => v.plate === b.vehiclePlate && v.contact === note.recipient)) {
    p.add(`${what}: vehicle ${b.vehiclePlate} and sorter ${note.recipient} were not ${b.client}'s ${area.code}'s then (${JSON.stringify(versions)})`);
  }
  const payload = { batchId: b.id, area: b.areaCode, vehiclePlate: b.vehiclePlate, reason: b.reason, parcels: members.length };
  if (!sameJson(note.payload, payload)) p.add(`${what}: notice payload ${JSON.stringify(note.payload)}`);
}

export function checkDelivery(note: NoteRow | undefined, sent: Sent[], r: Real, p: Problems, counts: Counts): void {
  if (!note) return;
  const mine = sent.filter((s) => s.id === note.id);
  if (note.status !== 'SENT' || mine.length === 0)
    p.add(`notice ${note.id} of batch ${note.batchId}: ${note.status}, the receiver took it ${mine.length} times`);
  for (const s of mine)
    if (s.recipient !== note.recipient || !sameJson(s.payload, note.payload)) p.add(`notice ${note.id}: the receiver took ${JSON.stringify(s)}`);
  if (mine.length > 0) counts.delivered++;
  if (mine.length > 1) {
    counts.deliveredTwice++;
    if (!repeatExplained(r, note)) p.add(`notice ${note.id}: taken ${mine.length} times without a fault that could cut a send off`);
  }
}
