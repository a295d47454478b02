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
// - every area's rule (its own batch size and maximum wait) is set again on
//   its Redis group where Redis lost it or missed a change (a PUT whose Redis
//   call failed), and a rule Redis holds for an area back on the defaults is
//   cleared.
// It works over every client's parcels, each in its own client's area: its
// batch is that client's, its group the one that names the client. "Overdue"
// is by each parcel's own area's maximum wait.
import type { Logger } from '../../core/logger.js';
import type { Batcher, GroupRule, PeriodicJob, TakenItem } from '../../queue/index.js';
import { ruleOf } from './parcels.changes.js';
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
  service: Pick<ParcelsService, 'commit' | 'regroup' | 'applyRule'>;
  batcher: Batcher;
  log: Logger;
  graceMs: number;
  everyMs: number;
}) {
  const waitRule = { batchSize: d.batcher.batchSize, maxWaitMs: d.batcher.maxWaitMs, graceMs: d.graceMs };

  /** Sets each area's rule on its group where Redis disagrees with the database; returns how many it set. */
  async function repairRules(): Promise<number> {
    const want = new Map<string, GroupRule>();
    for (const a of await d.repo.listAreaRules()) want.set(groupOf(a), ruleOf(a));
    const have = new Map<string, GroupRule>();
    for (let shard = 0; shard < d.batcher.keys.length; shard++) for (const [g, r] of await d.batcher.rules(shard)) have.set(g, r);
    let set = 0;
    const none: GroupRule = { batchSize: null, maxWaitMs: null };
    for (const group of new Set([...want.keys(), ...have.keys()])) {
      const w = want.get(group) ?? none;
      const h = have.get(group) ?? none;
      if (w.batchSize === h.batchSize && w.maxWaitMs === h.maxWaitMs) continue;
      await d.service.applyRule(areaOfGroup(group), w);
      set++;
    }
    return set;
  }

  async function run(): Promise<{ batches: number; parcels: number; regrouped: number; rules: number }> {
    // Rules first: the put-backs below then go into groups judged by the right ones.
    const rules = await repairRules();
    if (rules) d.log.warn({ rules }, 'parcels reconciliation set area rules Redis had lost or missed');
    const overdue = await d.repo.listOverdue(waitRule, PAGE);
    // By group: one per area of a client, with its batch size.
    const byGroup = new Map<string, { size: number; trackingNos: string[] }>();
    for (const p of overdue) {
      const group = groupOf({ client: p.client, code: p.areaCode });
      const g = byGroup.get(group) ?? { size: p.batchSize, trackingNos: [] };
      g.trackingNos.push(p.trackingNo);
      byGroup.set(group, g);
    }
    const chunks: { client: string; areaCode: string; trackingNos: string[] }[] = [];
    for (const [group, { size, trackingNos }] of byGroup) {
      const { client, code } = areaOfGroup(group);
      for (let i = 0; i < trackingNos.length; i += size) chunks.push({ client, areaCode: code, trackingNos: trackingNos.slice(i, i + size) });
    }
    const batches = chunks.length ? (await d.service.commit(chunks, 'TIMEOUT')).length : 0;
    for (const c of chunks) await d.batcher.remove(groupOf({ client: c.client, code: c.areaCode }), c.trackingNos);
    if (overdue.length) d.log.warn({ batches, parcels: overdue.length }, 'parcels reconciliation batched overdue parcels');

    const waiting = await d.repo.listRecentWaiting(waitRule, REGROUP_MIN_AGE_MS, PAGE);
    const waitingByGroup = new Map<string, TakenItem[]>();
    for (const p of waiting) {
      const group = groupOf({ client: p.client, code: p.areaCode });
      waitingByGroup.set(group, [...(waitingByGroup.get(group) ?? []), { item: p.trackingNo, arrivedAt: p.arrivedAt }]);
    }
    for (const [group, items] of waitingByGroup) await d.service.regroup(areaOfGroup(group), items);
    return { batches, parcels: overdue.length, regrouped: waiting.length, rules };
  }

  const job: PeriodicJob = { id: RECONCILE_JOB_ID, type: RECONCILE_JOB, schedule: { everyMs: d.everyMs }, run };
  return { run, job };
}
