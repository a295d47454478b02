// Making batches: the commit of a round's batches (one statement) with their
// notifications handed to delivery, and the way back into Redis for what a
// commit or a take left over. Every path ends with each parcel batched or
// waiting in its area's group; what Redis misses, the reconciliation pass
// puts back. A batch is its area's client's, and its area's group names the
// client (parcels.groups.ts): every path here carries the client along.
import { randomUUID } from 'node:crypto';
import { createGatherer } from '../../core/gather.js';
import type { Logger } from '../../core/logger.js';
import type { NotificationDispatch } from '../../core/delivery/index.js';
import { redisCall } from '../../core/redis-call.js';
import type { Batcher, GroupRule, TakenItem } from '../../queue/index.js';
import { type AreaKey, areaOfGroup, groupOf } from './parcels.groups.js';
import type { CommittedBatch, FlushKey, LeftParcel, ParcelsRepository } from './parcels.repository.js';

export type BatchReason = 'FULL' | 'TIMEOUT' | 'MANUAL';

/** The longest a commit's not-yet-due leftovers are held before going back into Redis. */
export const MAX_HOLD_MS = 1_000;
/** Full batches of one event-loop turn sharing one commit statement at most. */
const GATHER_MAX = 200;

/** A batch to commit: its area (client and code) and the parcels taken for it. */
export type BatchInput = { client: string; areaCode: string; trackingNos: readonly string[] };

export type BatchDeps = {
  repo: ParcelsRepository;
  batcher: Batcher;
  dispatch: NotificationDispatch;
  log: Logger;
  onBatch: (reason: BatchReason) => void;
};

export function createBatchCommits(d: BatchDeps) {
  const { repo, batcher, log } = d;

  /**
   * Commits batches (one statement) and hands their notifications to delivery.
   * Parcels of a batch that is no longer one (some of it was batched by
   * another committer, so the rest is not full or not due) go back into Redis.
   * `flushKey`: a manual flush's Idempotency-Key, stored with its one batch.
   */
  async function commit(batches: readonly BatchInput[], reason: BatchReason, flushKey: FlushKey | null = null): Promise<CommittedBatch[]> {
    const withIds = batches.map((b) => ({ ...b, id: randomUUID() }));
    const defaults = { maxWaitMs: batcher.maxWaitMs, batchSize: batcher.batchSize };
    const { committed: done, left } = await repo.commitBatches(withIds, reason, defaults, flushKey);
    await d.dispatch(done.flatMap((b) => (b.notificationId ? [b.notificationId] : [])));
    for (const b of done) {
      log.info({ batchId: b.batchId, client: b.client, area: b.areaCode, reason, parcels: b.attached }, 'batch dispatched');
      d.onBatch(reason);
    }
    await putBack(left);
    return done;
  }

  // Full batches taken out in one event-loop turn (a batch intake's adds, a
  // burst of single intakes) share one commit statement; each caller gets the
  // batches made of its own parcels (of its client: another client's may
  // have the same tracking numbers).
  const fullCommits = createGatherer<{ area: AreaKey; batches: readonly TakenItem[][] }, CommittedBatch[]>(async (items) => {
    const done = await commit(
      items.flatMap((it) => it.batches.map((b) => ({ client: it.area.client, areaCode: it.area.code, trackingNos: b.map((t) => t.item) }))),
      'FULL',
    );
    return items.map((it) => {
      const mine = new Set(it.batches.flatMap((b) => b.map((t) => t.item)));
      return { ok: true, value: done.filter((b) => b.client === it.area.client && b.trackingNos.some((t) => mine.has(t))) };
    });
  }, GATHER_MAX);

  /**
   * Commits full batches taken out of one area's group; if that fails they go
   * back into Redis (then the flusher, or else the reconciliation pass, batches them).
   */
  async function commitFull(area: AreaKey, batches: readonly TakenItem[][]): Promise<CommittedBatch[]> {
    if (batches.length === 0) return [];
    try {
      return await fullCommits.submit({ area, batches });
    } catch (err) {
      log.error({ err, client: area.client, area: area.code }, 'full batch not committed; putting it back');
      await restore(area, batches.flat(), false);
      return [];
    }
  }

  /**
   * Puts parcels back into their area's group, arrival as it was. With
   * `takeFull`, a group the put back makes full is batched at once. With
   * `rule`, the group's rule is set first (as the database has it). Never
   * throws: what is not put back, the reconciliation pass puts back or batches.
   */
  async function restore(area: AreaKey, items: readonly TakenItem[], takeFull: boolean, rule?: GroupRule): Promise<void> {
    const call = batcher.restore(groupOf(area), items, { takeFull, ...(rule && { rule }) });
    let batches: TakenItem[][];
    try {
      ({ batches } = await redisCall(call, 'batcher restore'));
    } catch (err) {
      // Answered after this caller gave up, it may still have run and taken full batches out: they
      // must be committed, not left in neither Redis nor the database until the reconciliation pass.
      if (takeFull) call.then((late) => commitFull(area, late.batches)).catch(() => {});
      log.warn({ err, client: area.client, area: area.code, parcels: items.length }, 'parcels not put back in Redis; the reconciliation pass will');
      return;
    }
    await commitFull(area, batches);
  }

  /**
   * Puts what a commit left over back. Parcels of a TIMEOUT batch the
   * database found not yet due (its clock behind Redis') are held until it
   * is (at most MAX_HOLD_MS at a time): back at once, they would be taken
   * again at once, round after round, until the database's clock caught up.
   * Each group gets its area's rule as the commit read it: a group whose rule
   * Redis lost or has not heard of yet would take the same refused batch
   * again and again. The rule carries its version: a group that holds a newer
   * one (a PUT committed after this commit read the area) keeps it.
   */
  async function putBack(left: readonly LeftParcel[]): Promise<void> {
    // By group: one per area of a client.
    const now = new Map<string, TakenItem[]>();
    const later = new Map<string, { items: TakenItem[]; inMs: number }>();
    const rules = new Map<string, GroupRule>();
    for (const l of left) {
      const group = groupOf({ client: l.client, code: l.areaCode });
      rules.set(group, l.rule);
      const item = { item: l.trackingNo, arrivedAt: l.arrivedAt };
      if (l.dueInMs > 0) {
        const h = later.get(group) ?? { items: [], inMs: 0 };
        h.items.push(item);
        h.inMs = Math.max(h.inMs, Math.min(l.dueInMs, MAX_HOLD_MS));
        later.set(group, h);
      } else now.set(group, [...(now.get(group) ?? []), item]);
    }
    for (const [group, h] of later) setTimeout(() => void restore(areaOfGroup(group), h.items, true, rules.get(group)), h.inMs).unref();
    for (const [group, items] of now) await restore(areaOfGroup(group), items, true, rules.get(group));
  }

  return { commit, commitFull, restore };
}

export type BatchCommits = ReturnType<typeof createBatchCommits>;
