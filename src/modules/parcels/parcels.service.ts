// Parcel batching: areas, intake, and the batches made at the batch size (on
// intake), at the maximum wait (the flusher) or by the reconciliation pass.
// PostgreSQL holds every parcel from intake on; Redis only groups them.
import { randomUUID } from 'node:crypto';
import { AppError } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';
import type { NotificationDispatch } from '../../core/outbox.js';
import { withTimeout } from '../../core/timeout.js';
import type { DueBatch, TakenItem } from '../../queue/batch-scripts.js';
import type { Batcher } from '../../queue/batcher.js';
import type { CommittedBatch, ParcelRow, ParcelsRepository } from './parcels.repository.js';

const REDIS_CALL_TIMEOUT_MS = 2_000;
const RECONCILE_PAGE = 5_000;

export function createParcelsService(d: {
  repo: ParcelsRepository;
  batcher: Batcher;
  dispatch: NotificationDispatch;
  log: Logger;
  reconcileGraceMs: number;
  onBatch: (reason: 'FULL' | 'TIMEOUT') => void;
}) {
  const { repo, batcher, log } = d;

  /** Commits batches (one statement) and hands their notifications to delivery. */
  async function commit(batches: readonly { areaCode: string; trackingNos: readonly string[] }[], reason: 'FULL' | 'TIMEOUT'): Promise<CommittedBatch[]> {
    const withIds = batches.map((b) => ({ ...b, id: randomUUID() }));
    const done = await repo.commitBatches(withIds, reason);
    await d.dispatch(done.flatMap((b) => (b.notificationId ? [b.notificationId] : [])));
    for (const b of done) {
      log.info({ batchId: b.batchId, reason, parcels: b.attached }, 'batch dispatched');
      d.onBatch(reason);
    }
    return done;
  }

  /** Puts a WAITING parcel into its area's group; commits the batch it completes. Returns that batch's id. */
  async function group(p: ParcelRow): Promise<string | null> {
    let taken: TakenItem[];
    try {
      // The wait counts from the intake (the row's time), not from when Redis heard of it.
      ({ taken } = await withTimeout(batcher.add(p.areaCode, p.trackingNo, p.createdAt.getTime()), REDIS_CALL_TIMEOUT_MS, 'batcher add'));
    } catch (err) {
      log.warn({ err, trackingNo: p.trackingNo }, 'parcel not grouped in Redis; the reconciliation pass will batch it');
      return null;
    }
    if (taken.length === 0) return null;
    try {
      const [b] = await commit([{ areaCode: p.areaCode, trackingNos: taken.map((t) => t.item) }], 'FULL');
      return b && taken.some((t) => t.item === p.trackingNo) ? b.batchId : null;
    } catch (err) {
      log.error({ err, area: p.areaCode }, 'full batch not committed; putting it back');
      await batcher.restore(p.areaCode, taken).catch(() => {});
      return null;
    }
  }

  return {
    async putArea(code: string, vehiclePlate: string, sorterContact: string) {
      return repo.upsertArea(code, vehiclePlate, sorterContact);
    },

    async getArea(code: string) {
      const area = await repo.findArea(code);
      if (!area) throw new AppError('AREA_NOT_FOUND', 404, `area ${code} does not exist`);
      return { area, waiting: await repo.waiting(code) };
    },

    /** Intake: 'created' for a new parcel, 'existing' for a repeat with the same area. */
    async intake(trackingNo: string, areaCode: string): Promise<{ parcel: ParcelRow; created: boolean }> {
      const inserted = await repo.insertParcel(trackingNo, areaCode);
      if (inserted) {
        const batchId = await group(inserted);
        return { parcel: batchId ? { ...inserted, status: 'BATCHED', batchId } : inserted, created: true };
      }
      const existing = await repo.findParcel(trackingNo);
      if (!existing) throw new AppError('UNKNOWN_AREA', 422, `area ${areaCode} does not exist`);
      if (existing.areaCode !== areaCode) {
        throw new AppError('TRACKING_NO_CONFLICT', 409, `parcel ${trackingNo} was already posted for another area`);
      }
      // A repeat may follow a lost Redis write: grouping again is idempotent.
      if (existing.status === 'WAITING') await group(existing);
      return { parcel: (await repo.findParcel(trackingNo)) ?? existing, created: false };
    },

    async getParcel(trackingNo: string): Promise<ParcelRow> {
      const p = await repo.findParcel(trackingNo);
      if (!p) throw new AppError('PARCEL_NOT_FOUND', 404, `parcel ${trackingNo} does not exist`);
      return p;
    },

    async getBatch(id: string) {
      const b = await repo.findBatch(id);
      if (!b) throw new AppError('BATCH_NOT_FOUND', 404, `batch ${id} does not exist`);
      return b;
    },

    listBatches: (areaCode: string, limit: number) => repo.listBatches(areaCode, limit),

    /** The latest batches across areas (the operators' dashboard). */
    recentBatches: (limit: number) => repo.listRecentBatches(limit),

    /** The flusher's handler: areas whose first parcel waited the maximum time, one round at once. */
    async flushTimedOut(batches: readonly DueBatch[]): Promise<void> {
      await commit(batches.map((b) => ({ areaCode: b.group, trackingNos: b.items.map((i) => i.item) })), 'TIMEOUT');
    },

    /**
     * Safety net for the window between taking a batch out of Redis and
     * committing it (a crash, a database outage) and for parcels Redis lost:
     * WAITING parcels past the maximum wait plus the grace become TIMEOUT
     * batches, and leave Redis so they cannot be batched twice.
     */
    async reconcile(): Promise<{ batches: number; parcels: number }> {
      const overdue = await repo.listOverdue(batcher.maxWaitMs + d.reconcileGraceMs, RECONCILE_PAGE);
      const byArea = new Map<string, string[]>();
      for (const p of overdue) byArea.set(p.areaCode, [...(byArea.get(p.areaCode) ?? []), p.trackingNo]);
      const chunks: { areaCode: string; trackingNos: string[] }[] = [];
      for (const [areaCode, trackingNos] of byArea) {
        for (let i = 0; i < trackingNos.length; i += batcher.batchSize) {
          chunks.push({ areaCode, trackingNos: trackingNos.slice(i, i + batcher.batchSize) });
        }
      }
      const batches = chunks.length ? (await commit(chunks, 'TIMEOUT')).length : 0;
      for (const c of chunks) await batcher.remove(c.areaCode, c.trackingNos);
      if (overdue.length) log.warn({ batches, parcels: overdue.length }, 'parcels reconciliation batched overdue parcels');
      return { batches, parcels: overdue.length };
    },
  };
}

export type ParcelsService = ReturnType<typeof createParcelsService>;
