// The notifications' delivery job: the delivery room's job handler
// (core/delivery/deliver-job.ts) under this queue's job type, calling the
// configured notifier. (The relay, which hands over rows whose delivery job
// was lost, is in notifications.reconcile.ts.)
import { type DeliveryDeps, deliverJobId, deliveryJobHandler } from '../../core/delivery/index.js';
import type { JobHandler, Queue } from '../../queue/index.js';
import { priorityOfKind } from './notification-priority.js';

export const DELIVER_JOB = 'notification.deliver';
export { deliverJobId };
/** The notification a delivery job id names; null for any other job. */
export { deliveryRowOf as notificationIdOf } from '../../core/delivery/index.js';

/**
 * Schedules the delivery jobs of committed rows. `nx` (the default) leaves a
 * job that exists alone; `replace` starts a fresh one whatever exists (a dead
 * one, one waiting out an old backoff, one in flight: fenced), for a row that
 * was taken back from a withdrawal and must be tried from its first attempt;
 * `revive` leaves a job pending or in flight alone and replaces a dead one,
 * for a row found PENDING by a job run again.
 * `kinds` (row id -> kind) sets each job's priority by its kind
 * (notification-priority.ts); a row missing from it gets the default.
 */
export async function scheduleDeliveries(queue: Queue, ids: readonly string[], how: 'nx' | 'replace' | 'revive' = 'nx', kinds?: ReadonlyMap<string, string>) {
  const jobs = (of: readonly string[], mode: 'nx' | 'upsert') =>
    of.map((id) => {
      const priority = priorityOfKind(kinds?.get(id));
      return { id: deliverJobId(id), type: DELIVER_JOB, delayMs: 0, payload: { notificationId: id }, mode, ...(priority !== undefined && { priority }) };
    });
  const results = await queue.scheduleMany(jobs(ids, how === 'replace' ? 'upsert' : 'nx'));
  if (how !== 'revive') return results;
  // A dead job would keep the row from delivery (nx answers it dead): replaced.
  const dead = ids.filter((_, i) => results[i]?.status === 'dead');
  if (dead.length > 0) await queue.scheduleMany(jobs(dead, 'upsert'));
  return results;
}

export function notificationsJobHandlers(deps: DeliveryDeps): Record<string, JobHandler> {
  return { [DELIVER_JOB]: deliveryJobHandler(deps) };
}
