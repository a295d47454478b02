// The parcels domain's statements on one database. Each lives in sql/, one
// file per transition with a header (what it does, why one statement, its
// guard, its lock order, what it returns). A parcel row exists (WAITING)
// before it enters Redis; a batch is committed in one statement that attaches
// only parcels not yet in a batch and writes the sorters' notification with it.
import type { Db } from '../../core/db.js';
import { purgeOf } from '../../core/retention.js';
import { type BatchReason, type BatchRule, type BatchToCommit, commitBatches } from './sql/commit-batches.js';
import { insertParcels } from './sql/insert-parcels.js';
import { PURGE_BATCHES } from './sql/purge.js';
import { findArea, findBatch, findParcel, findParcels, listBatches, listOverdue, listRecentBatches, listRecentWaiting, waitingIn } from './sql/reads.js';
import { upsertArea } from './sql/upsert-area.js';

export type { CommittedBatch, LeftParcel } from './sql/commit-batches.js';
export type { AreaRow, ParcelRow, RecentBatchRow } from './sql/parcel-row.js';

export function createParcelsRepository(db: Db) {
  return {
    upsertArea: (code: string, vehiclePlate: string, sorterContact: string) => upsertArea(db, code, vehiclePlate, sorterContact),
    findArea: (code: string) => findArea(db, code),
    waiting: (code: string) => waitingIn(db, code),
    insertParcels: (parcels: readonly { trackingNo: string; areaCode: string }[]) => insertParcels(db, parcels),
    findParcel: (trackingNo: string) => findParcel(db, trackingNo),
    findParcels: (trackingNos: readonly string[]) => findParcels(db, trackingNos),
    commitBatches: (batches: readonly BatchToCommit[], reason: BatchReason, rule: BatchRule) => commitBatches(db, batches, reason, rule),
    findBatch: (id: string) => findBatch(db, id),
    listBatches: (areaCode: string, limit: number) => listBatches(db, areaCode, limit),
    listRecentBatches: (limit: number) => listRecentBatches(db, limit),
    listOverdue: (olderThanMs: number, limit: number) => listOverdue(db, olderThanMs, limit),
    /** Retention: batches with their parcels and notices (sql/purge.ts). */
    retention: [purgeOf(db, 'batches', PURGE_BATCHES)] as const,
    listRecentWaiting: (youngerThanMs: number, olderThanMs: number, limit: number) => listRecentWaiting(db, youngerThanMs, olderThanMs, limit),
  };
}

export type ParcelsRepository = ReturnType<typeof createParcelsRepository>;
