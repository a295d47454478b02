// The parcels' safety net, a periodic job, for the window between taking a
// batch out of Redis and committing it (a crash, a database outage, an answer
// lost on the way back) and for parcels Redis lost:
// - WAITING parcels past the maximum wait plus the grace become TIMEOUT
//   batches of their area (at most the batch size each), and the batched
//   ones leave Redis so they cannot be batched twice (those the commit
//   refused, it put back: they stay);
// - the younger WAITING parcels are put (back) into Redis with their arrival
//   (a no-op for those still there), so a lost one counts towards its area's
//   batch size and its maximum wait again, and a group they make full is
//   batched at once. One that was in flight to a batch comes back as a stale
//   entry, which its next take drops (the commit only batches unbatched parcels);
//   one withdrawn, moved or batched between the page's read and its put back
//   is taken out again (its row, read after the put back, says so).
//   Parcels younger than REGROUP_MIN_AGE_MS are left alone: their intake may
//   still be adding them (put back under it, its own add would find them
//   taken and add them again, a stale entry made without any fault). They
//   are read a page at a time by keyset, at most REGROUP_PER_PASS a pass:
//   a pass that stops there leaves its place, and the next goes on from it
//   (then from the oldest again), so a backlog costs each pass the same.
// - every area's rule (its own batch size and maximum wait) is set again on
//   its Redis group where Redis lost it or missed a change (a PUT whose Redis
//   call failed), and a rule Redis holds for an area back on the defaults is
//   cleared.
// It works over every client's parcels, each in its own client's area: its
// batch is that client's, its group the one that names the client. "Overdue"
// is by each parcel's own area's maximum wait.
import type { Logger } from '../../core/logger.js';
import { forEachPage } from '../../core/keyset.js';
import type { Batcher, GroupRule, PeriodicJob, TakenItem } from '../../queue/index.js';
import { ruleOf } from './parcels.changes.js';
import { areaOfGroup, groupOf } from './parcels.groups.js';
import type { ParcelsRepository, RecentWaitingParcel } from './parcels.repository.js';
import type { ParcelsService } from './parcels.service.js';

export const RECONCILE_JOB = 'parcels.reconcile';
export const RECONCILE_JOB_ID = 'parcels:reconcile';

/** Overdue parcels batched per pass, at most (the oldest first; the next pass takes the rest). */
const PAGE = 5_000;
/** Waiting parcels put back per page read, and per pass at most (the next pass goes on from where this one stopped). */
export const REGROUP_PAGE = 500;
export const REGROUP_PER_PASS = 5_000;
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
  /** Waiting parcels put back per pass at most (default REGROUP_PER_PASS) and per page (default REGROUP_PAGE). */
  regroupPerPass?: number;
  regroupPage?: number;
  batcher: Batcher;
  log: Logger;
  graceMs: number;
  everyMs: number;
}) {
  const waitRule = { batchSize: d.batcher.batchSize, maxWaitMs: d.batcher.maxWaitMs, graceMs: d.graceMs };

  const perPass = d.regroupPerPass ?? REGROUP_PER_PASS;
  const pageSize = d.regroupPage ?? REGROUP_PAGE;
  /** Where the last pass stopped putting parcels back (null: at the end, so the next starts from the oldest). */
  let regroupFrom: RecentWaitingParcel | null = null;

  /**
   * Sets each area's rule on its group where Redis disagrees with the
   * database, with its version (a PUT that set a newer one since this read
   * keeps it); returns how many it set.
   */
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
      const area = areaOfGroup(group);
      // A rule Redis holds for an area back on the defaults: cleared at the area's version (none left: unversioned).
      const row = want.has(group) ? null : await d.repo.findArea(area.client, area.code);
      await d.service.applyRule(area, row ? ruleOf(row) : w);
      set++;
    }
    return set;
  }

  /**
   * After a page's put back: a parcel withdrawn, moved or batched since the
   * page was read may have gone back in after its own removal from the group.
   * Its row, read again now (after the put back), says so: it leaves the
   * group this pass put it in. (One settled after this read is removed by its
   * own step, which comes after its commit, so after the put back.)
   */
  async function dropSettled(page: readonly RecentWaitingParcel[]): Promise<void> {
    const byClient = new Map<string, RecentWaitingParcel[]>();
    for (const p of page) byClient.set(p.client, [...(byClient.get(p.client) ?? []), p]);
    for (const [client, parcels] of byClient) {
      const found = await d.repo.findParcels(
        client,
        parcels.map((p) => p.trackingNo),
      );
      const rows = new Map(found.map((r) => [r.trackingNo, r]));
      const settled = new Map<string, string[]>();
      for (const p of parcels) {
        const row = rows.get(p.trackingNo);
        if (row?.status === 'WAITING' && row.areaCode === p.areaCode) continue;
        const group = groupOf({ client, code: p.areaCode });
        settled.set(group, [...(settled.get(group) ?? []), p.trackingNo]);
      }
      for (const [group, trackingNos] of settled) await d.batcher.remove(group, trackingNos);
    }
  }

  /** Puts the waiting parcels (back) into their groups, a page at a time, at most `perPass` from where the last pass stopped; returns how many. */
  async function regroupWaiting(): Promise<number> {
    const start = regroupFrom;
    let seen = 0;
    let last: RecentWaitingParcel | null = null;
    await forEachPage<RecentWaitingParcel>(
      (after) =>
        seen >= perPass ? Promise.resolve([]) : d.repo.listRecentWaiting(waitRule, REGROUP_MIN_AGE_MS, Math.min(pageSize, perPass - seen), after ?? start),
      async (page) => {
        seen += page.length;
        last = page[page.length - 1] ?? last;
        const byGroup = new Map<string, TakenItem[]>();
        for (const p of page) {
          const group = groupOf({ client: p.client, code: p.areaCode });
          byGroup.set(group, [...(byGroup.get(group) ?? []), { item: p.trackingNo, arrivedAt: p.arrivedAt }]);
        }
        for (const [group, items] of byGroup) await d.service.regroup(areaOfGroup(group), items);
        await dropSettled(page);
      },
    );
    // Stopped by the bound: the next pass goes on after the last one; else it starts from the oldest.
    regroupFrom = seen >= perPass ? last : null;
    return seen;
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
    const made = chunks.length ? await d.service.commit(chunks, 'TIMEOUT') : [];
    // Only the parcels batched here leave Redis: those the commit refused it put back, and they must stay
    // (a stale entry of a parcel settled another way is dropped by the next commit that meets it).
    for (const b of made) await d.batcher.remove(groupOf({ client: b.client, code: b.areaCode }), b.trackingNos);
    const batches = made.length;
    if (overdue.length) d.log.warn({ batches, parcels: overdue.length }, 'parcels reconciliation batched overdue parcels');

    const regrouped = await regroupWaiting();
    return { batches, parcels: overdue.length, regrouped, rules };
  }

  const job: PeriodicJob = { id: RECONCILE_JOB_ID, type: RECONCILE_JOB, schedule: { everyMs: d.everyMs }, run };
  return { run, job };
}
