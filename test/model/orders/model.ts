// The orders model suite's model: what the suite knows of its orders, the
// clock tolerance its rules allow, and the answers every step reads the same
// way (fail, gone).
import type { Reply } from '../../chaos/drivers/http.js';

// Two clocks meet here (this process's and PostgreSQL's, one host) and a
// request's moment in the database lies between its send and its answer.
export const EPS_MS = 100;
export const SETTLE_MS = 60_000;

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

export function fail(what: string, r: Reply): never {
  throw new Error(`${what}: answered ${r.status} ${JSON.stringify(r.body)}`);
}

/** An order retention deleted is answered 404 from then on. */
export function gone(o: Order, what: string, res: Reply): boolean {
  if (!o.purged) return false;
  if (res.status !== 404 || res.body.code !== 'ORDER_NOT_FOUND') fail(`${what} ${o.id} after retention deleted it`, res);
  return true;
}
