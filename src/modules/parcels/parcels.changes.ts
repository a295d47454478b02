// Changes to what waits in an area: its batching rule (PUT /areas), a
// manual flush, a parcel withdrawn or moved to another area. Each is decided
// by one statement in sql/ (PostgreSQL is the truth), then the Redis group
// follows (commit, then the index); what Redis misses, the reconciliation
// pass repairs (a group's rule, a parcel's entry), and a stale entry left in
// a group is dropped by the commit of the next batch that takes it. A rule
// carries its version, so Redis never takes an older one over a newer; a
// move ends by placing the parcel where its committed row says, so racing
// moves leave it in one group, the right one.
import type { CountryCode } from 'libphonenumber-js';
import { checkedAnyContact } from '../../core/contact.js';
import { AppError } from '../../core/errors.js';
import { createIdempotently } from '../../core/idempotent-create.js';
import { redisCall } from '../../core/redis-call.js';
import type { GroupRule, TakenItem } from '../../queue/index.js';
import type { BatchCommits, BatchDeps } from './parcels.batches.js';
import { type AreaKey, groupOf } from './parcels.groups.js';
import type { AreaRow, FlushKey, ParcelRow } from './parcels.repository.js';

/** A manual flush's candidates at most: the largest batch size an area may have (the commit takes up to the area's own). */
const FLUSH_PICK_MAX = 1_000;

/** What PUT /areas/:code sets; an absent rule part is the default (null). */
export type AreaInput = { vehiclePlate: string; sorterContact: string; batchSize?: number | null; maxWaitSeconds?: number | null };

/** An area's rule as its Redis group takes it, with its version (an older one is refused there). */
export const ruleOf = (a: Pick<AreaRow, 'batchSize' | 'maxWaitSeconds' | 'ruleVersion'>): GroupRule => ({
  batchSize: a.batchSize,
  maxWaitMs: a.maxWaitSeconds === null ? null : a.maxWaitSeconds * 1_000,
  version: a.ruleVersion,
});

export function createParcelChanges(d: BatchDeps & { phoneRegion?: CountryCode | undefined }, commits: BatchCommits) {
  const { repo, batcher, log } = d;

  /**
   * Sets the area's rule on its Redis group and commits the full batches a
   * smaller size makes at once (a shorter wait wakes the flusher, which
   * takes the group if it is now due). A take answered after this caller
   * gave up is committed when its answer comes. Never throws.
   */
  async function applyRule(area: AreaKey, rule: GroupRule): Promise<void> {
    const set = batcher.setRule(groupOf(area), rule);
    let batches: TakenItem[][];
    try {
      ({ batches } = await redisCall(set, 'batcher set rule'));
    } catch (err) {
      set.then((late) => commits.commitFull(area, late.batches)).catch(() => {});
      log.warn({ err, client: area.client, area: area.code }, 'area rule not set in Redis; the reconciliation pass will');
      return;
    }
    await commits.commitFull(area, batches);
  }

  /** Drops parcels from an area's group (settled another way). Never throws: a stale entry is dropped by the next commit that meets it. */
  async function forget(area: AreaKey, trackingNos: readonly string[]): Promise<void> {
    await redisCall(batcher.remove(groupOf(area), trackingNos), 'batcher remove').catch((err: unknown) =>
      log.warn({ err, client: area.client, area: area.code, parcels: trackingNos.length }, 'parcels not removed from Redis; a later commit drops them'),
    );
  }

  /**
   * After a move's own Redis steps: places the parcel where its committed row
   * says now. Two moves of one parcel racing (to B and to A) each commit, then
   * each put it into their own area and out of the one they left; their Redis
   * steps may interleave in any order and leave it in the loser's group, or in
   * none. Every move reads the row after its steps and, when the row is
   * elsewhere, puts the parcel there and out of its own target; the last move
   * to read sees the last commit, and its steps come after every other's
   * (it only removes from its own target, never from the row's area).
   */
  async function follow(client: string, trackingNo: string, to: string): Promise<ParcelRow | null> {
    const now = await repo.findParcel(client, trackingNo);
    if (!now || (now.status === 'WAITING' && now.areaCode === to)) return now;
    // Elsewhere now, or settled (a withdraw's own remove may have come before this move's put back).
    if (now.status === 'WAITING') await commits.restore({ client, code: now.areaCode }, [{ item: trackingNo, arrivedAt: now.createdAt.getTime() }], true);
    await forget({ client, code: to }, [trackingNo]);
    return now;
  }

  /** One manual flush: its batch, made under `key` when given; 409 NOTHING_WAITING when none waits. */
  async function flushOnce(client: string, code: string, key: FlushKey | null) {
    if (!(await repo.findArea(client, code))) throw new AppError('AREA_NOT_FOUND', 404, `area ${code} does not exist`);
    const picked = await repo.oldestWaiting(client, code, FLUSH_PICK_MAX);
    const [made] = picked.length ? await commits.commit([{ client, areaCode: code, trackingNos: picked.map((p) => p.trackingNo) }], 'MANUAL', key) : [];
    if (!made) throw new AppError('NOTHING_WAITING', 409, `no parcel waits in area ${code}`);
    await forget({ client, code }, made.trackingNos);
    const batch = await repo.findBatch(client, made.batchId);
    if (!batch) throw new Error(`batch ${made.batchId} just made is gone`);
    return batch;
  }

  return {
    applyRule,

    /**
     * Creates or replaces the client's area: vehicle, sorters' contact (one
     * mailbox or one phone number, 422 INVALID_CONTACT else) and rule; the
     * rule applies to the parcels already waiting too.
     */
    async putArea(client: string, code: string, input: AreaInput): Promise<AreaRow> {
      const area = await repo.upsertArea(client, code, {
        vehiclePlate: input.vehiclePlate,
        sorterContact: checkedAnyContact(input.sorterContact, 'sorterContact', d.phoneRegion),
        batchSize: input.batchSize ?? null,
        maxWaitSeconds: input.maxWaitSeconds ?? null,
      });
      await applyRule({ client, code }, ruleOf(area));
      return area;
    },

    /**
     * A batch of what waits in the area now (MANUAL): its oldest parcels, up
     * to its batch size (the rest keep waiting). 409 NOTHING_WAITING when
     * none waits (or every one was batched or withdrawn meanwhile). Under an
     * Idempotency-Key (scoped to the client) a repeat answers the batch the
     * first one made, the key with another area 422 IDEMPOTENCY_KEY_REUSED.
     */
    async flush(client: string, code: string, idempotencyKey: string | null = null) {
      const once = () =>
        createIdempotently({
          key: idempotencyKey,
          body: { area: code },
          find: async (key) => {
            const b = await repo.findBatchByKey(client, key);
            return b && { row: b, requestHash: b.requestHash };
          },
          insert: (key, hash) => flushOnce(client, code, key === null ? null : { key, requestHash: hash }),
        });
      try {
        return (await once()).row;
      } catch (err) {
        // A flush under the same key raced this one and batched what waited (this one's
        // commit then found its parcels taken): that batch is the answer.
        if (idempotencyKey === null || !(err instanceof AppError) || err.code !== 'NOTHING_WAITING') throw err;
        return (await once()).row;
      }
    },

    /** Takes a waiting parcel out of its area for good; a repeat answers the same. 409 ALREADY_BATCHED once batched. */
    async withdraw(client: string, trackingNo: string): Promise<ParcelRow> {
      const p = (await repo.withdrawParcel(client, trackingNo)) ?? (await repo.findParcel(client, trackingNo));
      if (!p) throw new AppError('PARCEL_NOT_FOUND', 404, `parcel ${trackingNo} does not exist`);
      if (p.status === 'BATCHED') throw new AppError('ALREADY_BATCHED', 409, `parcel ${trackingNo} is in batch ${p.batchId}`);
      // A repeat removes it again: the first one's remove may have failed.
      if (p.status === 'WITHDRAWN') await forget({ client, code: p.areaCode }, [trackingNo]);
      return p;
    },

    /**
     * Moves a waiting parcel to another area of the client, its arrival kept:
     * into the new group first (a group it fills is batched at once, a group
     * whose wait it has now passed is flushed by the flusher), then out of the
     * old. 409 ALREADY_BATCHED, 409 PARCEL_WITHDRAWN, 404 for an unknown parcel or area.
     */
    async move(client: string, trackingNo: string, to: string): Promise<ParcelRow> {
      const moved = await repo.moveParcel(client, trackingNo, to);
      if (!moved) {
        const p = await repo.findParcel(client, trackingNo);
        if (!p) throw new AppError('PARCEL_NOT_FOUND', 404, `parcel ${trackingNo} does not exist`);
        if (p.status === 'BATCHED') throw new AppError('ALREADY_BATCHED', 409, `parcel ${trackingNo} is in batch ${p.batchId}`);
        if (p.status === 'WITHDRAWN') throw new AppError('PARCEL_WITHDRAWN', 409, `parcel ${trackingNo} was withdrawn`);
        if (!(await repo.findArea(client, to))) throw new AppError('AREA_NOT_FOUND', 404, `area ${to} does not exist`);
        // Still WAITING and the area there: it was batched and purged, or moved, between the two reads.
        throw new AppError('PARCEL_CHANGED', 409, `parcel ${trackingNo} changed while it was moved; try again`);
      }
      await commits.restore({ client, code: to }, [{ item: trackingNo, arrivedAt: moved.createdAt.getTime() }], true);
      if (moved.fromArea !== to) await forget({ client, code: moved.fromArea }, [trackingNo]);
      return (await follow(client, trackingNo, to)) ?? moved;
    },
  };
}
