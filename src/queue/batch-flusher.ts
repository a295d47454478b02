// Flushes groups whose first item has waited the maximum time. Per shard a wake
// loop sleeps until the earliest group deadline (first arrival + max wait) and
// is woken when a new group becomes the earliest; an idle re-check is the
// safety net. A batch whose commit fails is put back for the next round.
import type { DueBatch } from './batch-scripts.js';
import type { Batcher } from './batcher.js';
import type { RedisClient } from './scripts.js';
import { createServerClock, localNow } from './server-clock.js';
import type { QueueLogger } from './types.js';
import { type WakeLoop, createWakeLoop } from './wake-loop.js';
import { type WakeSubscriber, startWakeSubscriber } from './wake-subscriber.js';

/** Commits the batches of one flush round (all of them at once, so a burst of deadlines costs one commit). */
export type BatchHandler = (batches: readonly DueBatch[]) => Promise<void>;

const ERROR_BACKOFF_MS = 250;
const MAX_PENDING_COMMITS = 32;

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
  const clock = createServerClock();
  let subscriber: RedisClient | null = null;
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
    createWakeLoop(async () => {
      // Backpressure: with this many commits pending, wait for one before taking more.
      while (committing.size >= MAX_PENDING_COMMITS) await Promise.race(committing);
      const t0 = localNow();
      try {
        const r = await batcher.takeDue(shard);
        clock.sample(r.now, t0, localNow());
        if (r.batches.length > 0) {
          startCommit(r.batches);
          return 'again'; // more groups may be due
        }
        const deadline = r.nextFirstArrival === null ? Number.POSITIVE_INFINITY : r.nextFirstArrival + batcher.maxWaitMs;
        return clock.localAt(r.now + Math.min(Math.max(0, deadline - r.now), idleRecheckMs));
      } catch (err) {
        log.error({ err, batcher: batcher.name, shard }, 'flush round failed; retrying');
        return localNow() + ERROR_BACKOFF_MS;
      }
    }),
  );

  return {
    async start(): Promise<void> {
      subscriber = o.subscriber ?? o.redis.duplicate();
      const channels = new Map<string, (firstArrival: number) => void>();
      batcher.keys.forEach((k, shard) => {
        const loop = loops[shard] as WakeLoop;
        channels.set(k.wake, (first) => loop.wakeAt(clock.localAt(first + batcher.maxWaitMs)));
      });
      wake = await startWakeSubscriber({
        subscriber,
        channels,
        onReconnect: () => loops.forEach((l) => l.wakeNow()),
        pingEveryMs: idleRecheckMs,
        pingTimeoutMs: Math.max(idleRecheckMs, 2_000),
        log,
      });
      loops.forEach((l) => l.wakeNow());
    },
    async stop(): Promise<void> {
      await Promise.all(loops.map((l) => l.stop()));
      await Promise.all(committing);
      await wake?.stop();
      if (subscriber && subscriber !== o.subscriber) subscriber.disconnect();
    },
  };
}
