// The delivery room: every statement that writes a delivery row (README.md
// beside this file has the table of states, transitions, callers and guards).
// Domains embed the fragments (write, take-back, withdraw, purge) in their
// own statements; the delivery module calls the transitions through
// createDeliveries.

export * from './contract.js';
export { type Deliveries, createDeliveries, ownerTransitions } from './transitions.js';
export type { Claim } from './claim.js';
export { type DeliveryDeps, type Sender, deliverJobId, deliveryJobHandler, deliveryRowOf } from './deliver-job.js';
export { type DeliveryInsert, deliveryInsertSql } from './write.js';
export { type WrittenOrTakenBack, takeBackLockedFirstSql, takeBackOnConflictSql } from './take-back.js';
export { type Withdrawal, withdrawSql } from './withdraw.js';
export { deliveriesDeleteSql, deliveriesSettledSql } from './purge.js';
