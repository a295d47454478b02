// The orders' job types and ids: the expiry `order:<id>:expire` at the
// deadline, the payment reminder `order:<id>:remind` at its time. One job of
// each per order (deterministic ids): a moved deadline moves them, it never
// adds one.
import { rowJobId } from '../../core/row-job-id.js';

export const EXPIRE_JOB = 'order.expire';
const EXPIRE_JOB_ID = rowJobId('order', 'expire', { anyCase: true });
export const expireJobId = EXPIRE_JOB_ID.of;
/** The order an expiry job's id names; null for any other id. */
export const orderIdOfExpireJob = EXPIRE_JOB_ID.rowOf;
/**
 * An expiry job's payload: empty, as the handler reads the order from the job
 * id. A short record fits a record group (BENCHMARKS.md, "Engine at size").
 */
export const expirePayload = () => ({});

export const REMIND_JOB = 'order.remind';
const REMIND_JOB_ID = rowJobId('order', 'remind', { anyCase: true });
export const remindJobId = REMIND_JOB_ID.of;
/** The order a reminder job's id names; null for any other id. Its payload is empty too: the statement reads the deadline from the row. */
export const orderIdOfRemindJob = REMIND_JOB_ID.rowOf;
