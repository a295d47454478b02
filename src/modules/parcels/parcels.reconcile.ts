// The parcels' safety net, a periodic job, for the window between taking a
// batch out of Redis and committing it (a crash, a database outage, an answer
// lost on the way back) and for parcels Redis lost:
// - WAITING parcels past the maximum wait plus the grace become TIMEOUT
//   batches of their area (at most the batch size each), and leave Redis so
//   they cannot be batched twice;
// - the younger WAITING parcels are put (back) into Redis with their arrival
//   (a no-op for those still there), so a lost one counts towards its area's
//   batch size and its maximum wait again, and a group they make full is
//   batched at once. One that was in flight to a batch comes back as a stale
//   entry, which its next take drops (the commit only batches unbatched parcels).
//   Parcels younger than REGROUP_MIN_AGE_MS are left alone: their intake may
//   still be adding them (put back under it, its own add would find them
//   taken and add them again, a stale entry made without any fault).
// It works over every client's parcels, each in its own client's area: its
// batch is that client's, its group the one that names the client.
import type { Logger } from '../../core/logger.js';
import type { Batcher, PeriodicJob, TakenItem } from '../../queue/index.js';
import { areaOfGroup, groupOf } from './parcels.groups.js';
import type { ParcelsRepository } from './parcels.repository.js';
import type { ParcelsService } from './parcels.service.js';

export const RECONCILE_JOB = 'parcels.reconcile';
export const RECONCILE_JOB_ID = 'parcels:reconcile';

/** Overdue parcels batched per pass, at most (the oldest first; the next pass takes the rest). */
const PAGE = 5_000;
/**
 * An intake's add normally reaches Redis within its deadline (600 ms) of the
 * row's commit: a WAITING parcel older than this is not on its way any more.
 * (An intake stalled past it, or a commit of other processes in flight with
 * older parcels, only leaves a stale entry in Redis: a refused commit later,
 * never a broken rule, as the commit statement alone decides what is batched.)
 */
export const REGROUP_MIN_AGE_MS = 2_000;

export function createParcelsReconcile(d: {
  repo: ParcelsRepository;
  service: Pick<ParcelsService, 'commit' | 'regroup'>;
  batcher: Batcher;
  log: Logger;
  graceMs: number;
  everyMs: number;
}) {
  async function run(): Promise<{ batches: number; parcels: number; regrouped: number }> {
    const overdue = await d.repo.listOverdue(d.batcher.maxWaitMs + d.graceMs, PAGE);
    // By group: one per area of a client.
    const byGroup = new Map<string, string[]>();
    for (const p of overdue) {
      const group = groupOf({ client: p.client, code: p.areaCode });
      byGroup.set(group, [...(byGroup.get(group) ?? []), p.trackingNo]);
    }
    const chunks: { client: string; areaCode: string; trackingNos: string[] }[] = [];
    for (const [group, trackingNos] of byGroup) {
      const { client, code } = areaOfGroup(group);
      for (let i = 0; i < trackingNos.length; i += d.batcher.batchSize) {
        chunks.push({ client, areaCode: code, trackingNos: trackingNos.slice(i, i + d.batcher.batchSize) });
      }
    }
    const batches = chunks.length ? (await d.service.commit(chunks, 'TIMEOUT')).length : 0;
    for (const c of chunks) await d.batcher.remove(groupOf({ client: c.client, code: c.areaCode }), c.trackingNos);
    if (overdue.length) d.log.warn({ batches, parcels: overdue.length }, 'parcels reconciliation batched overdue parcels');

    const waiting = await d.repo.listRecentWaiting(d.batcher.maxWaitMs + d.graceMs, REGROUP_MIN_AGE_MS, PAGE);
    const waitingByGroup = new Map<string, TakenItem[]>();
    for (const p of waiting) {
      const group = groupOf({ client: p.client, code: p.areaCode });
      waitingByGroup.set(group, [...(waitingByGroup.get(group) ?? []), { item: p.trackingNo, arrivedAt: p.arrivedAt }]);
    }
    for (const [group, items] of waitingByGroup) await d.service.regroup(areaOfGroup(group), items);
    return { batches, parcels: overdue.length, regrouped: waiting.length };
  }

  const job: PeriodicJob = { id: RECONCILE_JOB_ID, type: RECONCILE_JOB, schedule: { everyMs: d.everyMs }, run };
  return { run, job };
}
