// The parcels domain's statements on one database. Each lives in sql/, one
// file per transition with a header (what it does, why one statement, its
// guard, its lock order, what it returns). A parcel row exists (WAITING)
// before it enters Redis; a batch is committed in one statement that attaches
// only parcels not yet in a batch and writes the sorters' notification with it.
import type { Db } from '../../core/db.js';
import { purgeOf } from '../../core/retention.js';
import { type BatchReason, type BatchRule, type BatchToCommit, type FlushKey, commitBatches } from './sql/commit-batches.js';
import { type NewParcel, insertParcels } from './sql/insert-parcels.js';
import { PURGE_BATCHES, purgeWithdrawn } from './sql/purge.js';
import { moveParcel } from './sql/move-parcel.js';
import {
  type RecentWaitingParcel,
  type WaitRule,
  findArea,
  findBatch,
  findBatchByKey,
  findParcel,
  findParcels,
  listAreaRules,
  listBatches,
  listOverdue,
  listRecentBatches,
  listRecentWaiting,
  oldestWaiting,
  waitingIn,
} from './sql/reads.js';
import { type AreaSettings, upsertArea } from './sql/upsert-area.js';
import { withdrawParcel } from './sql/withdraw-parcel.js';

export type { CommittedBatch, FlushKey, LeftParcel } from './sql/commit-batches.js';
export type { NewParcel } from './sql/insert-parcels.js';
export type { RecentWaitingParcel, WaitRule } from './sql/reads.js';
export type { AreaSettings } from './sql/upsert-area.js';
export type { AreaRow, ParcelRow, RecentBatchRow } from './sql/parcel-row.js';

/**
 * The API's reads and writes take the caller's client and see that client's
 * rows only; the internal paths (commits, the reconciliation pass's lists)
 * carry each row's client with it.
 */
export function createParcelsRepository(db: Db) {
  return {
    upsertArea: (client: string, code: string, settings: AreaSettings) => upsertArea(db, client, code, settings),
    findArea: (client: string, code: string) => findArea(db, client, code),
    waiting: (client: string, code: string) => waitingIn(db, client, code),
    insertParcels: (parcels: readonly NewParcel[]) => insertParcels(db, parcels),
    findParcel: (client: string, trackingNo: string) => findParcel(db, client, trackingNo),
    findParcels: (client: string, trackingNos: readonly string[]) => findParcels(db, client, trackingNos),
    commitBatches: (batches: readonly BatchToCommit[], reason: BatchReason, rule: BatchRule, flushKey?: FlushKey | null) =>
      commitBatches(db, batches, reason, rule, flushKey),
    findBatch: (client: string, id: string) => findBatch(db, client, id),
    findBatchByKey: (client: string, key: string) => findBatchByKey(db, client, key),
    listBatches: (client: string, areaCode: string, limit: number) => listBatches(db, client, areaCode, limit),
    listRecentBatches: (limit: number, client?: string) => listRecentBatches(db, limit, client),
    listOverdue: (rule: WaitRule, limit: number) => listOverdue(db, rule, limit),
    oldestWaiting: (client: string, code: string, limit: number) => oldestWaiting(db, client, code, limit),
    withdrawParcel: (client: string, trackingNo: string) => withdrawParcel(db, client, trackingNo),
    moveParcel: (client: string, trackingNo: string, to: string) => moveParcel(db, client, trackingNo, to),
    listAreaRules: () => listAreaRules(db),
    /** Retention: batches with their parcels and notices, and withdrawn parcels (sql/purge.ts). */
    retention: [purgeOf(db, 'batches', PURGE_BATCHES), purgeWithdrawn(db)] as const,
    listRecentWaiting: (rule: WaitRule, olderThanMs: number, limit: number, after?: RecentWaitingParcel | null) =>
      listRecentWaiting(db, rule, olderThanMs, limit, after),
  };
}

export type ParcelsRepository = ReturnType<typeof createParcelsRepository>;
