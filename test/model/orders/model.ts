// The orders model suite's model: what the suite knows of its orders, the
// clock tolerance its rules allow, and the answers every step reads the same
// way (fail, gone).
import type { Reply } from '../../chaos/drivers/http.js';
import { EPS_MS, SETTLE_MS, fail } from '../runner.js';

// Shared by every suite (runner.ts); here so the steps and checks import their model from one place.
export { EPS_MS, SETTLE_MS, fail };

/** An order's row and notices as read just before a retention pass deleted it. */
export type Seen = {
  row: { id: string; status: string; paidAt: Date | null; cancelledAt: Date | null; cancelReason: string | null };
  notes: { id: string; orderId: string | null; status: string; attempts: number; redriveRequested: boolean }[];
};
export type Order = {
  id: string;
  key: string;
  body: Record<string, unknown>;
  expiresAt: number;
  paid: boolean;
  cancelled: boolean;
  /** Deleted by a retention pass: as last seen if it was settled then ('unknown' if not: it settled in the moment between). */
  purged?: Seen | 'unknown';
};
export type Model = { orders: Order[] };

/** An order retention deleted is answered 404 from then on. */
export function gone(o: Order, what: string, res: Reply): boolean {
  if (!o.purged) return false;
  if (res.status !== 404 || res.body.code !== 'ORDER_NOT_FOUND') fail(`${what} ${o.id} after retention deleted it`, res);
  return true;
}
