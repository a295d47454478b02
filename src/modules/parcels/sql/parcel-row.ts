// Areas, parcels and batches as the statements answer them. Each is its
// client's: area codes and tracking numbers are unique per client.
import { Prisma } from '../../../generated/prisma/client.js';

export type AreaRow = {
  client: string;
  code: string;
  vehiclePlate: string;
  sorterContact: string;
  /** The area's own batch size and maximum wait; null: the defaults. */
  batchSize: number | null;
  maxWaitSeconds: number | null;
  /** Raised by every PUT: the rule's version in its Redis group (an older one is refused there). */
  ruleVersion: number;
  createdAt: Date;
  updatedAt: Date;
};
export type ParcelRow = {
  client: string;
  trackingNo: string;
  areaCode: string;
  status: 'WAITING' | 'BATCHED' | 'WITHDRAWN';
  batchId: string | null;
  createdAt: Date;
  batchedAt: Date | null;
};
export type RecentBatchRow = {
  id: string;
  client: string;
  areaCode: string;
  vehiclePlate: string;
  reason: 'FULL' | 'TIMEOUT' | 'MANUAL';
  parcelCount: number;
  createdAt: Date;
};
export const PARCEL_COLUMNS = Prisma.sql`client, tracking_no AS "trackingNo", area_code AS "areaCode", status::text AS status,
  batch_id AS "batchId", created_at AS "createdAt", batched_at AS "batchedAt"`;
