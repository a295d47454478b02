// The delivery room: every statement that writes a delivery row (README.md
// beside this file has the table of states, transitions, callers and guards).
// Domains embed the fragments (write, take-back, withdraw, purge) in their
// own statements; the delivery module calls the transitions through
// createDeliveries.
import type { Db } from '../db.js';
import { cancelWithdrawn } from './cancel-withdrawn.js';
import { type Claim, claimDeliveries } from './claim.js';
import { markAbandoned } from './abandon.js';
import { markSentMany } from './mark-sent.js';
import { recordFailure } from './record-failure.js';
import { requestRedrive } from './redrive.js';

export * from './contract.js';
export type { Claim } from './claim.js';
export { type DeliveryInsert, deliveryInsertSql } from './write.js';
export { type WrittenOrTakenBack, takeBackOnConflictSql } from './take-back.js';
export { type Withdrawal, withdrawSql } from './withdraw.js';
export { deliveriesDeleteSql, deliveriesSettledSql } from './purge.js';

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

export type Deliveries = ReturnType<typeof createDeliveries>;
