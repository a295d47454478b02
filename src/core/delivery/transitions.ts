// The transitions on one database: what a delivery job calls
// (createDeliveries) and what a row's owner calls in its own transaction
// (ownerTransitions). Each statement is its own file beside this one.
// Guard: and Lock order: each file's own header.
import type { Db } from '../db.js';
import { cancelWithdrawn } from './cancel-withdrawn.js';
import { type Claim, claimDeliveries } from './claim.js';
import { markAbandoned } from './abandon.js';
import { markSentMany } from './mark-sent.js';
import { recordFailure } from './record-failure.js';
import { requestRedrive } from './redrive.js';
import { moveDelivery } from './move.js';
import { cancelDelivery } from './cancel.js';

/** The transitions a delivery makes, on `db`. */
export function createDeliveries(db: Db) {
  const d = {
    claimMany: (asked: readonly { id: string; dueAt: Date }[], staleMs: number) => claimDeliveries(db, asked, staleMs),
    /** claimMany of one. */
    claim: async (id: string, staleMs: number, delivery: { dueAt: Date }): Promise<Claim> =>
      (await claimDeliveries(db, [{ id, dueAt: delivery.dueAt }], staleMs))[0] as Claim,
    markSentMany: (ids: readonly string[]) => markSentMany(db, ids),
    /** markSentMany of one: false when it was SENT already. */
    markSent: async (id: string): Promise<boolean> => (await markSentMany(db, [id]))[0] as boolean,
    recordFailure: (id: string, error: string, final: boolean, refused: boolean) => recordFailure(db, id, error, final, refused),
    cancelWithdrawn: (id: string) => cancelWithdrawn(db, id),
    markAbandoned: (ids: readonly string[], sendingSeconds: number) => markAbandoned(db, ids, sendingSeconds),
    requestRedrive: (ids: readonly string[], asked: boolean) => requestRedrive(db, ids, asked),
  };
  return d;
}

/** The transitions a row's owner makes inside its own transaction (`db` that transaction): a timer's moves and cancels. */
export function ownerTransitions(db: Pick<Db, '$executeRaw'>) {
  return {
    move: (id: string, dueAt: Date, payload: unknown) => moveDelivery(db, id, dueAt, payload),
    cancel: (id: string, reason: string) => cancelDelivery(db, id, reason),
  };
}

export type Deliveries = ReturnType<typeof createDeliveries>;
