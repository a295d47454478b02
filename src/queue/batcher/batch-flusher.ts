// Flushes groups whose first item has waited the maximum time (the group's
// own, or the batcher's default). Per shard a wake loop sleeps until the
// earliest group deadline (first arrival + max wait, the groups ZSET's score)
// and is woken when a group's deadline becomes the earliest; an idle re-check
// is the safety net. A batch whose commit fails is put back for the next round.
import type { DueBatch } from '../scripts/batch-scripts.js';
import type { Batcher } from './batcher.js';
import { TimeoutError, withTimeout } from '../timeout.js';
import type { RedisClient } from '../scripts/scripts.js';
import { localNow } from '../wake/server-clock.js';
import type { QueueLogger } from '../types.js';
import { type WakeLoop, createWakeLoop } from '../wake/wake-loop.js';
import { type WakeSubscriber, listenForWakeUps } from '../wake/wake-subscriber.js';

/** Commits the batches of one flush round (all of them at once, so a burst of deadlines costs one commit). */
export type BatchHandler = (batches: readonly DueBatch[]) => Promise<void>;

const ERROR_BACKOFF_MS = 250;
const MAX_PENDING_COMMITS = 32;
/**
 * A take unanswered this long is given up on (its connection is ended and
 * opened again): a flusher stuck on a dead connection would flush no area on
 * time. The batcher's deadline makes the abandoned take change nothing.
 */
const TAKE_TIMEOUT_MS = 2_000;

export function createBatchFlusher(o: {
  batcher: Batcher;
  redis: RedisClient;
  subscriber?: RedisClient;
  onBatch: BatchHandler;
  log: QueueLogger;
  idleRecheckMs?: number;
}) {
  const { batcher, log } = o;
  const idleRecheckMs = o.idleRecheckMs ?? 5_000;
  const { clock } = batcher;
  let wake: WakeSubscriber | null = null;

  async function commit(batches: readonly DueBatch[]): Promise<void> {
    try {
      await o.onBatch(batches);
    } catch (err) {
      log.error({ err, groups: batches.length }, 'batch commit failed; putting the batches back');
      // If this fails too, the items stay in the database as waiting and the
      // reconciliation pass batches them.
      for (const b of batches) {
        await batcher.restore(b.group, b.items).catch((e: unknown) => log.error({ err: e, group: b.group }, 'batch not put back'));
      }
    }
  }

  // Commits run beside the loop, not in it: a slow commit (a WAL flush, a busy
  // pool) must not hold back the take of the next area whose deadline comes.
  const committing = new Set<Promise<void>>();
  function startCommit(batches: readonly DueBatch[]): void {
    const p = commit(batches).finally(() => committing.delete(p));
    committing.add(p);
  }

  const loops: WakeLoop[] = batcher.keys.map((_, shard) =>
    createWakeLoop(
      async () => {
        // Backpressure: with this many commits pending, wait for one before taking more.
        while (committing.size >= MAX_PENDING_COMMITS) await Promise.race(committing);
        const take = batcher.takeDue(shard);
        try {
          const r = await withTimeout(take, TAKE_TIMEOUT_MS, 'batch take');
          if (r.late) return 'again';
          if (r.batches.length > 0) {
            startCommit(r.batches);
            return 'again'; // more groups may be due
          }
          const deadline = r.nextDeadline ?? Number.POSITIVE_INFINITY;
          return clock.localAt(r.now + Math.min(Math.max(0, deadline - r.now), idleRecheckMs));
        } catch (err) {
          log.error({ err, batcher: batcher.name, shard }, 'flush round failed; retrying');
          if (err instanceof TimeoutError) {
            // The take may have run (in time) and its answer be on its way: its
            // batches must be committed, not left in neither Redis nor the database.
            take.then((late) => late.batches.length > 0 && startCommit(late.batches)).catch(() => {});
            o.redis.disconnect(true);
          }
          return localNow() + ERROR_BACKOFF_MS;
        }
      },
      (err) => log.error({ err, batcher: batcher.name, shard }, 'flush step failed; retrying'),
    ),
  );

  return {
    async start(): Promise<void> {
      wake = await listenForWakeUps({
        redis: o.redis,
        ...(o.subscriber && { subscriber: o.subscriber }),
        // A group that became the earliest announces its deadline.
        targets: batcher.keys.map((k, shard) => {
          const loop = loops[shard] as WakeLoop;
          return { channel: k.wake, wakeAt: (deadline) => loop.wakeAt(clock.localAt(deadline)), wakeNow: loop.wakeNow };
        }),
        idleRecheckMs,
        log,
      });
    },
    async stop(): Promise<void> {
      await Promise.all(loops.map((l) => l.stop()));
      await Promise.all(committing);
      await wake?.stop();
    },
  };
}
