// Parcel batching: areas, intake, and the batches made at the batch size (on
// intake), at the maximum wait (the flusher), by the reconciliation pass, or
// on demand (a manual flush; with withdraw and move, in parcels.changes.ts).
// PostgreSQL holds every parcel from intake on; Redis only groups them.
// Every API function takes the caller's client first and sees only that
// client's areas, parcels and batches: another client's are as absent as
// unknown ones, and its area codes and tracking numbers are its own.
import { isDatabaseUnavailable } from '../../core/db-errors.js';
import type { CountryCode } from 'libphonenumber-js';
import { AppError } from '../../core/errors.js';
import { gatherOrEach } from '../../core/gather.js';
import { redisCall } from '../../core/redis-call.js';
import type { DueBatch, TakenItem } from '../../queue/index.js';
import { type BatchDeps, createBatchCommits } from './parcels.batches.js';
import { createParcelChanges } from './parcels.changes.js';
import { type AreaKey, areaOfGroup, groupOf } from './parcels.groups.js';
import type { CommittedBatch, NewParcel, ParcelRow } from './parcels.repository.js';

/** Single intakes sharing one INSERT at most. */
const GATHER_MAX = 200;

/** One parcel of a batch intake: taken in (new or a repeat of the same area), or refused with a code. */
export type IntakeOutcome =
  | { readonly ok: true; readonly parcel: ParcelRow; readonly created: boolean }
  | { readonly ok: false; readonly code: 'UNKNOWN_AREA' | 'TRACKING_NO_CONFLICT'; readonly message: string };

/** Inserts of one parcel at most: another try only when retention deleted the parcel the last one met. */
const INTAKE_TRIES = 3;

/** A parcel's key: a client id holds no '/', so the first one ends it. */
const parcelKey = (client: string, trackingNo: string) => `${client}/${trackingNo}`;

export function createParcelsService(
  d: BatchDeps & { /** Region of sorter numbers given without a country code (PHONE_DEFAULT_REGION). */ phoneRegion?: CountryCode | undefined },
) {
  const { repo, batcher, log } = d;
  const commits = createBatchCommits(d);
  const { commit, commitFull, restore } = commits;
  const changes = createParcelChanges(d, commits);
  // Concurrent single intakes (of any clients) share one INSERT; a client's
  // tracking number twice in one statement is inserted once, for the first
  // caller of its area (the rest find it existing, theirs or another area's).
  const inserts = gatherOrEach<NewParcel, ParcelRow | null>(
    async (items) => {
      const rows = new Map((await repo.insertParcels(items)).map((r) => [parcelKey(r.client, r.trackingNo), r]));
      return items.map((it) => {
        const key = parcelKey(it.client, it.trackingNo);
        const row = rows.get(key);
        if (!row || row.areaCode !== it.areaCode) return null;
        rows.delete(key);
        return row;
      });
    },
    async (item) => (await repo.insertParcels([item]))[0] ?? null,
    { maxBatch: GATHER_MAX, whole: isDatabaseUnavailable },
  );

  /** Puts a WAITING parcel into its area's group; commits the batch it completes. Returns that batch. */
  async function group(p: ParcelRow): Promise<CommittedBatch | null> {
    const area: AreaKey = { client: p.client, code: p.areaCode };
    // The wait counts from the intake (the row's time), not from when Redis heard of it.
    const add = batcher.add(groupOf(area), p.trackingNo, p.createdAt.getTime());
    let batches: TakenItem[][];
    try {
      const r = await redisCall(add, 'batcher add');
      if (r.late) throw new Error('the add reached Redis after its deadline and changed nothing');
      batches = r.batches;
    } catch (err) {
      // An add answered after this caller gave up may still have run in time:
      // the batches it took must be committed, not left in neither Redis nor
      // the database. (A reply lost for good: the reconciliation pass puts the
      // parcels back.)
      add.then((late) => commitFull(area, late.batches)).catch(() => {});
      log.warn({ err, client: p.client, trackingNo: p.trackingNo }, 'parcel not grouped in Redis; the reconciliation pass will');
      return null;
    }
    const done = await commitFull(area, batches);
    return done.find((b) => b.trackingNos.includes(p.trackingNo)) ?? null;
  }

  return {
    /** Creates or replaces the client's area `code` (another client's of the same code is another area), its rule applied to what waits. */
    putArea: changes.putArea,
    flush: changes.flush,
    withdraw: changes.withdraw,
    move: changes.move,
    /** Sets an area's rule on its Redis group, batching what it makes full (the reconciliation pass uses it). */
    applyRule: changes.applyRule,

    async getArea(client: string, code: string) {
      const area = await repo.findArea(client, code);
      if (!area) throw new AppError('AREA_NOT_FOUND', 404, `area ${code} does not exist`);
      return { area, waiting: await repo.waiting(client, code) };
    },

    /** Intake: 'created' for a new parcel, 'existing' for a repeat with the same area. */
    async intake(client: string, trackingNo: string, areaCode: string): Promise<{ parcel: ParcelRow; created: boolean }> {
      for (let attempt = 1; ; attempt++) {
        const inserted = await inserts.submit({ client, trackingNo, areaCode });
        if (inserted) {
          const b = await group(inserted);
          return { parcel: b ? { ...inserted, status: 'BATCHED', batchId: b.batchId, batchedAt: b.createdAt } : inserted, created: true };
        }
        const existing = await repo.findParcel(client, trackingNo);
        if (existing) {
          if (existing.areaCode !== areaCode) {
            throw new AppError('TRACKING_NO_CONFLICT', 409, `parcel ${trackingNo} was already posted for another area`);
          }
          // A repeat may follow a lost Redis write: grouping again is idempotent.
          if (existing.status === 'WAITING') await group(existing);
          return { parcel: (await repo.findParcel(client, trackingNo)) ?? existing, created: false };
        }
        // Neither inserted nor found: the area is unknown (to this client), or
        // the parcel the insert met was deleted by retention in between (then again).
        if (attempt >= INTAKE_TRIES || !(await repo.findArea(client, areaCode))) throw new AppError('UNKNOWN_AREA', 422, `area ${areaCode} does not exist`);
      }
    },

    /**
     * Intake of many parcels (each as intake() takes one): inserted in one
     * statement, looked up in one, grouped in Redis with one call per area, and read
     * back in one (a parcel the request's later ones completed a batch with
     * is BATCHED). An outcome per parcel, in order; one refused parcel never
     * fails the others. A tracking number twice: the first is taken in, the
     * repeat answered as a repeat.
     */
    async intakeMany(client: string, parcels: readonly { trackingNo: string; areaCode: string }[]): Promise<IntakeOutcome[]> {
      const inserted = new Map((await repo.insertParcels(parcels.map((p) => ({ client, ...p })))).map((r) => [r.trackingNo, r]));
      const found = new Map(
        (
          await repo.findParcels(
            client,
            parcels.filter((p) => !inserted.has(p.trackingNo)).map((p) => p.trackingNo),
          )
        ).map((r) => [r.trackingNo, r]),
      );
      // Neither inserted nor found: an unknown area, or a parcel deleted by retention in between (it goes in now).
      const neither = parcels.filter((p) => !inserted.has(p.trackingNo) && !found.has(p.trackingNo));
      if (neither.length > 0) for (const r of await repo.insertParcels(neither.map((p) => ({ client, ...p })))) inserted.set(r.trackingNo, r);
      const created = new Set<string>();
      const toGroup = new Map<string, ParcelRow>();
      const first: (IntakeOutcome | 'taken')[] = parcels.map(({ trackingNo, areaCode }) => {
        const row = inserted.get(trackingNo);
        if (row && row.areaCode === areaCode && !created.has(trackingNo)) {
          created.add(trackingNo);
          toGroup.set(trackingNo, row);
          return 'taken';
        }
        const existing = row ?? found.get(trackingNo);
        if (!existing) return { ok: false, code: 'UNKNOWN_AREA', message: `area ${areaCode} does not exist` };
        if (existing.areaCode !== areaCode) {
          return { ok: false, code: 'TRACKING_NO_CONFLICT', message: `parcel ${trackingNo} was already posted for another area` };
        }
        // A repeat may follow a lost Redis write: grouping again is idempotent.
        if (existing.status === 'WAITING') toGroup.set(trackingNo, existing);
        return 'taken';
      });
      // Into Redis with one call per area (each adds its parcels, arrival as
      // their rows say, and takes out the full batches they complete).
      const byArea = new Map<string, TakenItem[]>();
      for (const p of toGroup.values()) {
        const items = byArea.get(p.areaCode) ?? [];
        items.push({ item: p.trackingNo, arrivedAt: p.createdAt.getTime() });
        byArea.set(p.areaCode, items);
      }
      await Promise.all([...byArea].map(([code, items]) => restore({ client, code }, items, true)));
      const now = new Map((await repo.findParcels(client, [...new Set(parcels.map((p) => p.trackingNo))])).map((r) => [r.trackingNo, r]));
      const seen = new Set<string>();
      return first.map((o, i): IntakeOutcome => {
        if (o !== 'taken') return o;
        const trackingNo = (parcels[i] as { trackingNo: string }).trackingNo;
        const isNew = created.has(trackingNo) && !seen.has(trackingNo);
        seen.add(trackingNo);
        const parcel = now.get(trackingNo) ?? inserted.get(trackingNo) ?? (found.get(trackingNo) as ParcelRow);
        return { ok: true, parcel, created: isNew };
      });
    },

    async getParcel(client: string, trackingNo: string): Promise<ParcelRow> {
      const p = await repo.findParcel(client, trackingNo);
      if (!p) throw new AppError('PARCEL_NOT_FOUND', 404, `parcel ${trackingNo} does not exist`);
      return p;
    },

    async getBatch(client: string, id: string) {
      const b = await repo.findBatch(client, id);
      if (!b) throw new AppError('BATCH_NOT_FOUND', 404, `batch ${id} does not exist`);
      return b;
    },

    listBatches: (client: string, areaCode: string, limit: number) => repo.listBatches(client, areaCode, limit),

    /** The latest batches across areas, of every client or of one (the operators' dashboard), each with its client. */
    recentBatches: (limit: number, client?: string) => repo.listRecentBatches(limit, client),

    /** The flusher's handler: areas whose first parcel waited the maximum time, one round at once (of any clients). */
    async flushTimedOut(batches: readonly DueBatch[]): Promise<void> {
      await commit(
        batches.map((b) => {
          const area = areaOfGroup(b.group);
          return { client: area.client, areaCode: area.code, trackingNos: b.items.map((i) => i.item) };
        }),
        'TIMEOUT',
      );
    },

    /** Commits batches; what is no longer a batch goes back to waiting (the reconciliation pass uses it). */
    commit,

    /** Puts waiting parcels (back) into their area's group, batching full groups at once (the reconciliation pass uses it). */
    regroup: (area: AreaKey, items: readonly TakenItem[]) => restore(area, items, true),
  };
}

export type ParcelsService = ReturnType<typeof createParcelsService>;
