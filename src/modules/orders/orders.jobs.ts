// The expiry jobs of orders, handled in batches: one statement cancels every
// due order of the batch (sql/cancel.ts expireOrders; an order changed under
// its lock is left to a second or third); and their payment reminder jobs,
// likewise (sql/write-payment-reminders.ts). Idempotent: a second delivery
// finds its order settled, or its reminder written, and changes nothing. A
// job that finds its time not yet come by the database (its deadline moved
// later, or the clocks apart) comes back then; one whose order kept changing
// under the expiry's lock comes back in 100 ms.
// (The periodic reconciliation pass is in orders.reconcile.ts.)
import { NonRetryableError, type AnyJobHandler, type BatchOutcome } from '../../queue/index.js';
import type { Logger } from '../../core/logger.js';
import { EXPIRE_JOB, REMIND_JOB, type OrdersService, orderIdOfExpireJob, orderIdOfRemindJob } from './orders.service.js';

// Redis fired the job by its clock; the database's may be behind. Come back when
// the database says the deadline passes (a delay it measured on its own clock,
// so no third clock enters), but not in a tight loop.
const MIN_DEFER_MS = 20;
/** Expiries cancelled by one statement at most. */
export const EXPIRE_BATCH_MAX = 500;

export function ordersJobHandlers(service: OrdersService, log: Logger): Record<string, AnyJobHandler> {
  return {
    [EXPIRE_JOB]: {
      maxBatch: EXPIRE_BATCH_MAX,
      async batch(jobs) {
        // The order is the job id's (the payload is empty).
        const orderIds = jobs.map((job) => orderIdOfExpireJob(job.id)?.toLowerCase() ?? null); // as the database answers ids
        const outcomes = await service.expireMany([...new Set(orderIds.flatMap((id) => (id ? [id] : [])))]);
        return jobs.map((job, i): BatchOutcome => {
          const orderId = orderIds[i];
          if (!orderId) return { error: new NonRetryableError(`job ${job.id} names no order`) };
          const r = outcomes.get(orderId);
          if (r?.kind === 'not_due') return { retryInMs: Math.max(r.inMs + 1, MIN_DEFER_MS) };
          if (r?.kind === 'cancelled') log.info({ jobId: job.id, orderId }, 'order cancelled: payment timeout');
          return undefined;
        });
      },
    },
    [REMIND_JOB]: {
      maxBatch: EXPIRE_BATCH_MAX,
      async batch(jobs) {
        const orderIds = jobs.map((job) => orderIdOfRemindJob(job.id)?.toLowerCase() ?? null);
        const outcomes = await service.remindMany([...new Set(orderIds.flatMap((id) => (id ? [id] : [])))]);
        return jobs.map((job, i): BatchOutcome => {
          const orderId = orderIds[i];
          if (!orderId) return { error: new NonRetryableError(`job ${job.id} names no order`) };
          const r = outcomes.get(orderId);
          if (r?.kind === 'not_due') return { retryInMs: Math.max(r.inMs + 1, MIN_DEFER_MS) };
          if (r?.kind === 'written') log.info({ jobId: job.id, orderId }, 'order payment reminder written');
          return undefined;
        });
      },
    },
  };
}
