// Delivery of outbox rows: one queue job per notification, retried with the
// configured spacing, FAILED and dead-lettered after the last attempt, and a
// periodic relay that hands over rows whose delivery job never got scheduled.
import { z } from 'zod';
import type { Logger } from '../../core/logger.js';
import { NonRetryableError } from '../../queue/errors.js';
import type { Queue } from '../../queue/queue.js';
import type { PeriodicJob } from '../../queue/periodic.js';
import type { JobHandler } from '../../queue/types.js';
import type { Notifier } from './notifier.js';
import type { NotificationsRepository } from './notifications.repository.js';

export const DELIVER_JOB = 'notification.deliver';
export const RELAY_JOB = 'notifications.relay';
export const RELAY_JOB_ID = 'notifications:relay';
export const deliverJobId = (notificationId: string) => `notification:${notificationId}:deliver`;

// A row younger than this may still be on its way from the dispatch after commit.
const RELAY_MIN_AGE_SECONDS = 5;
const RELAY_PAGE = 1_000;

const deliverPayload = z.object({ notificationId: z.uuid() });

export function scheduleDeliveries(queue: Queue, ids: readonly string[]) {
  return queue.scheduleMany(
    ids.map((id) => ({ id: deliverJobId(id), type: DELIVER_JOB, delayMs: 0, payload: { notificationId: id }, mode: 'nx' as const })),
  );
}

export function notificationsJobHandlers(deps: {
  repo: NotificationsRepository;
  notifier: Notifier;
  queue: Queue;
  log: Logger;
}): Record<string, JobHandler> {
  const { repo, notifier, log } = deps;
  return {
    [DELIVER_JOB]: async (job, ctx) => {
      const p = deliverPayload.safeParse(job.payload);
      if (!p.success) throw new NonRetryableError(`bad payload for ${job.id}`);
      const n = await repo.find(p.data.notificationId);
      // Never send twice, nor what its domain withdrew (a reminder of a cancelled or moved slot).
      if (!n || n.status === 'SENT' || n.status === 'CANCELLED') return;
      try {
        await notifier.send(n, ctx.signal);
      } catch (err) {
        const final = err instanceof NonRetryableError || job.attempts >= job.maxAttempts;
        const text = err instanceof Error ? err.message : String(err);
        await repo.recordFailure(n.id, text, final);
        log.warn({ notificationId: n.id, attempts: job.attempts, final, error: text }, 'notification delivery failed');
        throw err;
      }
      await repo.markSent(n.id);
    },

  };
}

/** Hands over rows whose delivery job never got scheduled (a lost dispatch), every interval. */
export function notificationsRelayJob(deps: { repo: NotificationsRepository; queue: Queue; log: Logger; everyMs: number }): PeriodicJob {
  const { repo, log } = deps;
  return {
    id: RELAY_JOB_ID,
    type: RELAY_JOB,
    schedule: { everyMs: deps.everyMs },
    run: async () => {
      let cursor: { createdAt: Date; id: string } | null = null;
      let handed = 0;
      for (;;) {
        const page: { createdAt: Date; id: string }[] = await repo.listPending(RELAY_MIN_AGE_SECONDS, cursor, RELAY_PAGE);
        if (page.length === 0) break;
        const r = await scheduleDeliveries(deps.queue, page.map((x) => x.id));
        handed += r.filter((x) => x.status === 'created').length;
        cursor = page[page.length - 1] ?? null;
      }
      if (handed > 0) log.warn({ handed }, 'notification relay scheduled deliveries that were missing');
    },
  };
}
