// The parcels model suite's look into the service's Redis groups, on the
// suite's own connection (past the proxy a fault may silence): two rules the
// answers cannot show at once. A group's deadline (when the flusher makes its
// TIMEOUT batch) counts by its area's own maximum wait; a parcel that waits
// is in the group of the area its row says (a parcel in none waits for the
// reconciliation pass, and its lateness is excused for a moved parcel).
import { isRedisUnavailable, redisCall } from '../../../src/core/redis-call.js';
import { groupOf } from '../../../src/modules/parcels/parcels.groups.js';
import { PARCELS_QUEUE } from '../../../src/modules/parcels/parcels.module.js';
import type { Batcher } from '../../../src/queue/index.js';
import type { Real } from '../runner.js';
import type { FaultKind } from '../world.js';
import { type Area, LINGER_MS, MAX_WAIT_MS, type Model, SIZE } from './model.js';

/** A group is judged only while no take of it can be under way: its deadline at least this far ahead. */
export const TAKE_MARGIN_MS = 500;

/** The service's batcher (its groups and rules), on the suite's own connection. */
export const serviceBatcher = (r: Real): Batcher => r.world.batcher(PARCELS_QUEUE, { batchSize: SIZE, maxWaitMs: MAX_WAIT_MS });

/** The service's group of a model's area (parcels.groups.ts: the client's, for two areas of one code). */
export const groupOfArea = (a: Area) => groupOf({ client: a.client, code: a.code });

/**
 * The faults that can undo or delay the service's Redis writes: Redis lost
 * its last second, hung or cut off, or the API killed between a commit and
 * its Redis steps. (A worker's or PostgreSQL's fault neither writes a rule
 * nor moves a parcel between groups; a request it cuts off is tried again,
 * and a retried request is not judged.)
 */
const REDIS_SIDE: readonly FaultKind[] = ['restartRedis', 'hangRedis', 'silenceRedis', 'killApi'];

/** No fault of the Redis side (`any`: of any kind) from LINGER_MS before `since` until now (one still under way has no end yet). */
export const calmSince = (r: Real, since: number, any = false): boolean =>
  !r.run.faultSpans.some((f) => (any || REDIS_SIDE.includes(f.kind)) && f.to + LINGER_MS >= since);

/** Counts a look into Redis in the run's summary (`what`: judged, or why not). */
export const noteLook = (m: Model, what: string) => void (m.looks[what] = (m.looks[what] ?? 0) + 1);

/** How many wait in the area's group; null when Redis does not answer. */
export async function waitingCount(r: Real, area: Area): Promise<number | null> {
  try {
    return (await redisCall(serviceBatcher(r).waiting(groupOfArea(area)), 'group: waiting')).count;
  } catch (err) {
    if (!isRedisUnavailable(err)) throw err;
    return null;
  }
}

/**
 * The area's group, when it waits, has its deadline at its oldest entry's
 * arrival + its own maximum wait, the rule Redis holds for it, and that rule
 * is the area's (the last PUT's: PUT /areas applies it to what already waits
 * before it answers). Judged on a group read twice alike around the rule's
 * read (not in the middle of another caller's take), and only without a
 * fault since the last PUT; a rule Redis does not hold yet (a call that
 * outlived its request, the reconciliation pass to repair it) is not judged.
 */
export async function checkDeadline(m: Model, r: Real, area: Area, what: string): Promise<void> {
  const last = area.versions.at(-1);
  if (!last || !calmSince(r, last.from)) return noteLook(m, 'deadline: fault near');
  const batcher = serviceBatcher(r);
  const group = groupOfArea(area);
  const look = () => redisCall(batcher.waiting(group), 'deadline: waiting');
  try {
    const w = await look();
    if (w.deadline === null || w.firstArrival === null) return;
    const held = (await redisCall(batcher.rules(0), 'deadline: rules')).get(group)?.maxWaitMs ?? MAX_WAIT_MS;
    const again = await look();
    if (again.deadline !== w.deadline || again.firstArrival !== w.firstArrival) return noteLook(m, 'deadline: group changing');
    // The last PUT's rule, or one of a PUT retried (an attempt given up on may land late).
    const waits = [last, ...area.versions.filter((v) => v.to === Number.POSITIVE_INFINITY)].map((v) => v.waitMs);
    if (!waits.includes(held)) return noteLook(m, 'deadline: rule not in Redis yet');
    noteLook(m, `deadline judged (wait ${held} ms)`);
    if (w.deadline - w.firstArrival !== held)
      throw new Error(
        `${what}: group of ${area.client}'s ${area.code} (${w.count} waiting) due ${w.deadline - w.firstArrival} ms after its first arrival, its rule's wait is ${held} ms`,
      );
  } catch (err) {
    if (!isRedisUnavailable(err)) throw err;
  }
}
