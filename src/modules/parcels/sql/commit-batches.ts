// Batched: waiting parcels attached to new batches, each bound to its area's
// current vehicle, with its BATCH_DISPATCHED delivery row.
//
// One statement for a flush round's batches (of any clients): each parcel
// found by its key (client, tracking number) and locked, a batch judged on its
// parcels' rows by its area's rule (the area's own batch size and maximum
// wait, else the defaults given), made only if it still is one (a TIMEOUT
// batch only when its oldest unbatched parcel has waited the maximum by the
// database clock and they are no more than the size; a FULL batch only with
// all of the batch size unbatched; a MANUAL batch of the oldest of them, up
// to the size, the rest left waiting), its parcels attached and its notice
// written together; the batch and its notice are the area's client's. Guard:
// `parcels.batch_id IS NULL` and not WITHDRAWN on each locked parcel of the
// batch's own client and area (a parcel is in one batch at most, of its own
// client and area, never in a batch above its area's size, a withdrawn one in
// none). The area's row is share-locked where its rule is read: a PUT waits
// for the commit, and one that committed while the commit waited for its
// parcels is read as it is now (the statement's snapshot would give the rule
// before it, a batch above a size already lowered and answered). Lock order:
// the parcels in (client, tracking number) order (one order for every
// committer, and for withdraw and move, which lock one: no deadlock), then
// the areas (shared; a PUT locks only its area), then the new batches and notices.
// A MANUAL batch may carry the flush's Idempotency-Key (unique: a second
// batch under one key fails the statement whole, nothing attached). Returns
// the batches made and the parcels left waiting (each with its area's rule
// and its version), to go back into Redis.
import { Prisma } from '../../../generated/prisma/client.js';
import type { Db } from '../../../core/db.js';
import { dedupeKeySql, deliveryInsertSql } from '../../../core/delivery/index.js';

/** A batch made, of its area's client: its parcels' tracking numbers in code-unit order (JavaScript's sort, not the database's collation). */
export type CommittedBatch = {
  batchId: string;
  client: string;
  areaCode: string;
  attached: number;
  trackingNos: string[];
  notificationId: string | null;
  createdAt: Date;
};
/**
 * A parcel a commit left waiting: its batch was no longer one. `dueInMs`: a
 * TIMEOUT batch refused because its oldest parcel had not waited the maximum
 * by the database clock says how long that is still to go (else 0). `rule`:
 * its area's own batch size and maximum wait (ms) as the commit read them
 * (null: the default) with the area's rule version, to set its Redis
 * group's by (a newer rule there refuses it).
 */
export type LeftParcel = {
  client: string;
  trackingNo: string;
  areaCode: string;
  arrivedAt: number;
  dueInMs: number;
  rule: { batchSize: number | null; maxWaitMs: number | null; version: number };
};

/** A batch to make: its new id, its area (client and code) and the parcels (of that client) taken for it. */
export type BatchToCommit = { id: string; client: string; areaCode: string; trackingNos: readonly string[] };
/** A manual flush's Idempotency-Key (scoped to the client) and its request's hash, stored with the one batch it makes. */
export type FlushKey = { key: string; requestHash: string | null };
export type BatchReason = 'FULL' | 'TIMEOUT' | 'MANUAL';
/** The default rule, of an area without its own: a batch is full at `batchSize`, due when its first parcel has waited `maxWaitMs`. */
export type BatchRule = { maxWaitMs: number; batchSize: number };

/** The sorters' notice of each new batch `b`, sent to its area's sorter contact. */
const DISPATCHED_NOTICE = deliveryInsertSql({
  kind: 'BATCH_DISPATCHED',
  from: Prisma.sql`b JOIN areas a ON a.client = b.client AND a.code = b.area_code`,
  dedupeKey: dedupeKeySql.batchDispatched(Prisma.sql`b.id`),
  subject: { column: 'batch_id', value: Prisma.sql`b.id` },
  client: Prisma.sql`b.client`,
  recipient: Prisma.sql`a.sorter_contact`,
  payload: Prisma.sql`jsonb_build_object('batchId', b.id, 'area', b.area_code, 'vehiclePlate', b.vehicle_plate,
                                         'reason', b.reason::text, 'parcels', b.parcel_count)`,
});

/** A row of the batch commit's answer: a batch made, its notice, or one of the parcels it judged (ok: its batch was made). */
type CommitRow = {
  kind: 'batch' | 'notice' | 'parcel';
  batch_id: string;
  id: string | null;
  attached: number | null;
  created_at: Date | null;
  client: string | null;
  tracking_no: string | null;
  area_code: string | null;
  arrived_ms: bigint | null;
  due_in_ms: bigint | null;
  ok: boolean | null;
  own_size: number | null;
  own_wait_ms: bigint | null;
  own_version: number | null;
};

function commitBatchesSql(o: {
  ids: string[];
  clients: string[];
  areas: string[];
  tracking: string[];
  reason: BatchReason;
  maxWaitMs: number;
  batchSize: number;
  flushKey: FlushKey | null;
}): Prisma.Sql {
  const { reason, maxWaitMs, batchSize } = o;
  const key = o.flushKey?.key ?? null;
  const hash = o.flushKey?.requestHash ?? null;
  return Prisma.sql`WITH input AS (
     SELECT * FROM unnest(${o.ids}::uuid[], ${o.clients}::text[], ${o.areas}::text[], ${o.tracking}::text[]) AS t(batch_id, client, area_code, tracking_no)
      ORDER BY client, tracking_no, batch_id
   ), found AS (
     -- Each parcel found by its key (of the batch's client, in the batch's area), locked in key order
     -- (input's): one lock order for all committers, no deadlock. A join left to the planner read every
     -- unbatched parcel (or every parcel, by a sequential scan) to meet the few it asked for.
     SELECT p.client, p.tracking_no, p.area_code, p.created_at, input.batch_id
       FROM input CROSS JOIN LATERAL (
            SELECT parcels.client, parcels.tracking_no, parcels.area_code, parcels.created_at FROM parcels
             WHERE parcels.client = input.client AND parcels.tracking_no = input.tracking_no AND parcels.area_code = input.area_code AND parcels.batch_id IS NULL
               AND parcels.status <> 'WITHDRAWN'
             FOR UPDATE) p
   ), w AS (
     -- A parcel named twice (by two batches of one call, of its area) counts once, for the first: the
     -- counts below are of parcels. (Picked after the area is matched: a batch of another area that
     -- names it must not take it from the one of its own.)
     SELECT DISTINCT ON (client, tracking_no) * FROM found ORDER BY client, tracking_no, batch_id
   ), counted AS (
     -- Per batch and area: a batch id given with two areas (no caller does) fails on the batches' key,
     -- never makes a batch of another area's (or client's) parcels. rn: the parcel's place, oldest first.
     SELECT w.*, count(*) OVER per_batch AS n, min(w.created_at) OVER per_batch AS first,
            row_number() OVER (per_batch ORDER BY w.created_at, w.tracking_no) AS rn
       FROM w WINDOW per_batch AS (PARTITION BY w.batch_id, w.client, w.area_code)
   ), ruled AS (
     -- The area's rule (its own, else the defaults), by the area's key: one lookup per parcel, the row
     -- share-locked (its latest version, not the snapshot's: the header).
     SELECT counted.*, r.own_size, r.own_wait_ms, r.own_version, COALESCE(r.own_size, ${batchSize}::int) AS size,
            COALESCE(r.own_wait_ms, ${maxWaitMs}::bigint) AS wait_ms
       FROM counted CROSS JOIN LATERAL (
            SELECT areas.batch_size AS own_size, areas.max_wait_seconds::bigint * 1000 AS own_wait_ms, areas.rule_version AS own_version FROM areas
             WHERE areas.client = counted.client AND areas.code = counted.area_code
               FOR SHARE) r
   ), judged AS (
     -- A batch is made only if it still is one (commitBatches' rule), judged on each of its parcels' rows.
     SELECT ruled.*,
            CASE ${reason}::text WHEN 'TIMEOUT' THEN first <= now() - make_interval(secs => wait_ms::double precision / 1000) AND n <= size
                                 WHEN 'MANUAL' THEN rn <= size
                          ELSE n = size END AS ok
       FROM ruled
   ), b AS (
     -- The batch is its area's client's: the one of its parcels; its count, of the parcels it takes.
     INSERT INTO batches (id, client, area_code, vehicle_plate, reason, parcel_count, created_at, idempotency_key, request_hash)
     SELECT j.batch_id, a.client, a.code, a.vehicle_plate, ${reason}::"BatchReason", j.taken, now(), ${key}::varchar, ${hash}::char(64)
       FROM (SELECT batch_id, client, area_code, count(*)::int AS taken FROM judged WHERE ok GROUP BY batch_id, client, area_code) j
       JOIN areas a ON a.client = j.client AND a.code = j.area_code
     RETURNING id, client, area_code, vehicle_plate, reason, parcel_count, created_at
   ), u AS (
     -- The rows found by key again (the arrays of the key's two columns), not by a join the planner may
     -- make a scan of the table; each parcel attached to its judged batch of its own client. The call's
     -- clients (few: usually one) are a parameter: as a subquery's array, of a size the planner cannot
     -- know, they made it price the lookups above a scan of the table.
     UPDATE parcels SET batch_id = j.batch_id, status = 'BATCHED', batched_at = now()
       FROM judged j
      WHERE parcels.client = ANY(${[...new Set(o.clients)]}::text[])
        AND parcels.tracking_no = ANY(ARRAY(SELECT tracking_no FROM judged WHERE ok))
        AND parcels.client = j.client AND parcels.tracking_no = j.tracking_no AND j.ok
     RETURNING parcels.tracking_no
   ), n AS (
     ${DISPATCHED_NOTICE}
     RETURNING id, batch_id
   )
   SELECT 'batch' AS kind, b.id AS batch_id, NULL::uuid AS id, b.parcel_count AS attached, b.created_at, b.client,
          NULL::text AS tracking_no, b.area_code, NULL::bigint AS arrived_ms, NULL::bigint AS due_in_ms, NULL::boolean AS ok,
          NULL::int AS own_size, NULL::bigint AS own_wait_ms, NULL::int AS own_version
     FROM b
   UNION ALL
   SELECT 'notice', n.batch_id, n.id, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL FROM n
   UNION ALL
   SELECT 'parcel', j.batch_id, NULL, NULL, NULL, j.client, j.tracking_no, j.area_code, floor(extract(epoch FROM j.created_at) * 1000)::bigint,
          CASE ${reason}::text WHEN 'TIMEOUT'
            THEN GREATEST(0, ceil(extract(epoch FROM j.first + make_interval(secs => j.wait_ms::double precision / 1000) - now()) * 1000))::bigint
            ELSE 0 END,
          j.ok, j.own_size, j.own_wait_ms, j.own_version
     FROM judged j`;
}

/**
 * The batch commit's statement (commitBatches) and its parameters. Every step
 * is linear in the call's parcels: each parcel is found by its key, a batch is
 * judged on its parcels' rows (window functions), and the answer comes back as
 * rows of three kinds, put together in commitBatches. Joins of the
 * statement's own CTEs, which the planner takes for one row each, ran as
 * nested loops whose cost grew with the square of a call's size
 * (BENCHMARKS.md, parcel intake).
 */
export function commitBatchesQuery(
  batches: readonly BatchToCommit[],
  reason: BatchReason,
  rule: BatchRule,
  flushKey: FlushKey | null = null,
): { sql: Prisma.Sql; parcels: number } {
  const ids: string[] = [];
  const clients: string[] = [];
  const areas: string[] = [];
  const tracking: string[] = [];
  for (const b of batches) {
    for (const t of b.trackingNos) {
      ids.push(b.id);
      clients.push(b.client);
      areas.push(b.areaCode);
      tracking.push(t);
    }
  }
  return { sql: commitBatchesSql({ ids, clients, areas, tracking, reason, ...rule, flushKey }), parcels: tracking.length };
}

/** Commits `batches` (a flush round's worth) as the header says; the batches made and the parcels left waiting. */
export async function commitBatches(
  db: Db,
  batches: readonly BatchToCommit[],
  reason: BatchReason,
  rule: BatchRule,
  flushKey: FlushKey | null = null,
): Promise<{ committed: CommittedBatch[]; left: LeftParcel[] }> {
  const q = commitBatchesQuery(batches, reason, rule, flushKey);
  if (q.parcels === 0) return { committed: [], left: [] };
  const rows = await db.$queryRaw<CommitRow[]>(q.sql);
  const made: Omit<CommittedBatch, 'trackingNos' | 'notificationId'>[] = [];
  const notices = new Map<string, string>();
  const members = new Map<string, string[]>();
  const left: LeftParcel[] = [];
  for (const r of rows) {
    if (r.kind === 'batch')
      made.push({
        batchId: r.batch_id,
        client: r.client as string,
        areaCode: r.area_code as string,
        attached: Number(r.attached),
        createdAt: r.created_at as Date,
      });
    else if (r.kind === 'notice') notices.set(r.batch_id, r.id as string);
    else if (r.ok) {
      const list = members.get(r.batch_id);
      if (list) list.push(r.tracking_no as string);
      else members.set(r.batch_id, [r.tracking_no as string]);
    } else
      left.push({
        client: r.client as string,
        trackingNo: r.tracking_no as string,
        areaCode: r.area_code as string,
        arrivedAt: Number(r.arrived_ms),
        dueInMs: Number(r.due_in_ms),
        rule: { batchSize: r.own_size, maxWaitMs: r.own_wait_ms === null ? null : Number(r.own_wait_ms), version: Number(r.own_version) },
      });
  }
  const committed = made.map((b) => ({ ...b, trackingNos: (members.get(b.batchId) ?? []).sort(), notificationId: notices.get(b.batchId) ?? null }));
  return { committed, left };
}
