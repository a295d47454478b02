// The orders model suite's model: what the suite knows of its orders (each
// its client's), the clock tolerance its rules allow, and the answers every
// step reads the same way (fail, gone, notFound).
import type { Reply } from '../../chaos/drivers/http.js';
import { EPS_MS, type Real, SETTLE_MS, answeredAsUnknown, fail } from '../runner.js';
import { type FaultSpan, MODEL_CLIENTS, type ModelClient } from '../world.js';

// Shared by every suite (runner.ts); here so the steps and checks import their model from one place.
export { EPS_MS, SETTLE_MS, fail };

/** An order's row and notices as read just before a retention pass deleted it. */
export type Seen = {
  row: { id: string; client: string; status: string; paidAt: Date | null; cancelledAt: Date | null; cancelReason: string | null };
  notes: {
    id: string;
    kind: string;
    client: string;
    orderId: string | null;
    status: string;
    attempts: number;
    redriveRequested: boolean;
    dedupeKey: string;
    /** Why it was withdrawn or failed (the reminder rules tell a move's withdrawal apart). */
    lastError?: string | null;
    withdrawnAt?: Date | null;
    createdAt: Date;
    sendingAt: Date | null;
  }[];
};
export type Order = {
  id: string;
  /** The client that created it: only its requests may see or change it. */
  client: ModelClient;
  key: string;
  body: Record<string, unknown>;
  /** Its current deadline: the latest a move or an extension answered, else the create's. */
  expiresAt: number;
  createdAt: number;
  /** Every deadline it has had, the create's first: a reminder may be written for each, once. */
  deadlines: number[];
  /** When its client first heard a 200 for its pay or cancel (the test host's clock): committed by then. */
  settledAnsweredAt?: number;
  /** Its payment reminder's lead (ms), asked on create; null: none. */
  leadMs: number | null;
  paid: boolean;
  cancelled: boolean;
  /** Whether its own client sent a pay, a cancel (whatever the answer). */
  tried: { pay: boolean; cancel: boolean };
  /** Pays and cancels the other client sent it (each answered 404, changing nothing). */
  foreign: { pay: number; cancel: number };
  /** Deleted by a retention pass: as last seen if it was settled then ('unknown' if not: it settled in the moment between). */
  purged?: Seen | 'unknown';
  /** When its expiry job was last made due before its deadline (run-now, a clock step), and whether one was cancelled: how it must come back. */
  expiry?: { ranEarlyAt?: number; jobCancelled?: boolean };
};
/** `clockSteps`: SkewClocks steps taken (counted in the summary). */
export type Model = { orders: Order[]; clockSteps: number };

/** The client that does not own an order: its requests must find nothing. */
export function otherClient(c: ModelClient): ModelClient {
  return MODEL_CLIENTS.find((x) => x !== c) as ModelClient;
}

/**
 * Holds another client's request for order `o` (`send`: that request for a
 * given id) to the rule: answered exactly as an id no order has (404
 * ORDER_NOT_FOUND, and the same problem body but for the id).
 */
export function notFound(o: Order, r: Real, what: string, send: (id: string) => Promise<Reply>): Promise<void> {
  const by = `${what} ${o.id} (of ${o.client}) by ${otherClient(o.client)}`;
  return answeredAsUnknown(r, what, by, o.id, send, (res) => res.status === 404 && res.body.code === 'ORDER_NOT_FOUND');
}

/** An order retention deleted is answered 404 from then on. */
export function gone(o: Order, what: string, res: Reply): boolean {
  if (!o.purged) return false;
  if (res.status !== 404 || res.body.code !== 'ORDER_NOT_FOUND') fail(`${what} ${o.id} after retention deleted it`, res);
  return true;
}

/**
 * How long a fault may hold an expiry or a reminder up after its step ended:
 * a silenced connection found dead (the socket timeout), a worker's
 * replacement starting beside the other, connections made again. Killing the
 * API holds neither up.
 */
const faultTailMs = (f: FaultSpan) => (f.kind === 'killApi' ? null : f.kind === 'silenceRedis' ? 2_000 : 1_000);

/** Whether a fault of the run (one still going included) may have held an expiry or a reminder up between `from` and `to`. */
export function faultNear(r: Real, from: number, to: number): boolean {
  return r.run.faultSpans.some((f) => {
    const tail = faultTailMs(f);
    return tail !== null && f.from <= to && f.to + tail >= from;
  });
}

/**
 * How late past its deadline a timeout may cancel an order: done by its own
 * expiry job (back at the deadline the database measured, if it ran early,
 * whatever the hosts' clocks say), never left to the reconciliation pass,
 * which takes only orders a second or more past their deadline.
 */
export const ON_TIME_MS = 1_000;
