// The expiry job of one order: idempotent, a second delivery changes nothing.
// (The periodic reconciliation pass is in orders.reconcile.ts.)
import { z } from 'zod';
import { NonRetryableError, type JobHandler } from '../../queue/index.js';
import type { Logger } from '../../core/logger.js';
import { EXPIRE_JOB, type OrdersService } from './orders.service.js';

// Redis fired the job by its clock; the database's may be behind. Come back when
// the database says the deadline passes (a delay it measured on its own clock,
// so no third clock enters), but not in a tight loop.
const MIN_DEFER_MS = 20;

const expirePayload = z.object({ orderId: z.uuid() });

export function ordersJobHandlers(service: OrdersService, log: Logger): Record<string, JobHandler> {
  return {
    [EXPIRE_JOB]: async (job) => {
      const p = expirePayload.safeParse(job.payload);
      if (!p.success) throw new NonRetryableError(`bad payload for ${job.id}`);
      const r = await service.expire(p.data.orderId);
      if (r.kind === 'not_due') return { retryInMs: Math.max(r.inMs + 1, MIN_DEFER_MS) };
      if (r.kind === 'cancelled') log.info({ jobId: job.id, orderId: p.data.orderId }, 'order cancelled: payment timeout');
    },
  };
}
