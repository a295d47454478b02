// Jobs of the orders queue: the expiry of one order and the periodic
// reconciliation pass. Both are idempotent: a second delivery changes nothing.
import { z } from 'zod';
import { NonRetryableError } from '../../queue/errors.js';
import type { PeriodicJob } from '../../queue/periodic.js';
import type { JobHandler } from '../../queue/types.js';
import type { Logger } from '../../core/logger.js';
import { EXPIRE_JOB, type OrdersService } from './orders.service.js';

export const RECONCILE_JOB = 'orders.reconcile';
export const RECONCILE_JOB_ID = 'orders:reconcile';

// Redis fired the job by its clock; the database may be a few ms behind. Come back
// at the deadline, but not in a tight loop.
const MIN_DEFER_MS = 20;

const expirePayload = z.object({ orderId: z.uuid() });

/** The safety net: cancels long-overdue orders and re-creates missing expiry jobs, every interval. */
export function ordersReconcileJob(service: OrdersService, everyMs: number): PeriodicJob {
  return { id: RECONCILE_JOB_ID, type: RECONCILE_JOB, schedule: { everyMs }, run: () => service.reconcile(2 * everyMs) };
}

export function ordersJobHandlers(service: OrdersService, log: Logger): Record<string, JobHandler> {
  return {
    [EXPIRE_JOB]: async (job) => {
      const p = expirePayload.safeParse(job.payload);
      if (!p.success) throw new NonRetryableError(`bad payload for ${job.id}`);
      const r = await service.expire(p.data.orderId);
      if (r.kind === 'not_due') return { retryAt: Math.max(r.expiresAt.getTime() + 1, Date.now() + MIN_DEFER_MS) };
      if (r.kind === 'cancelled') log.info({ jobId: job.id, orderId: p.data.orderId }, 'order cancelled: payment timeout');
    },
  };
}
