// Dead-set retention: while a worker runs, dead jobs past the queue's
// retention (DeadRetention) are removed once a minute, a bounded number per
// shard a sweep, so the dead set never grows without end.
import type { QueueLogger } from '../types.js';
import type { Queue } from './queue.js';

/** How often dead jobs past the queue's retention are removed. */
const DEAD_SWEEP_EVERY_MS = 60_000;

export type DeadSweeper = { start(): void; stop(): void };

export function createDeadSweeper(queue: Queue, log: QueueLogger): DeadSweeper {
  let timer: NodeJS.Timeout | null = null;

  async function sweep(): Promise<void> {
    try {
      const removed = await queue.trimDead();
      if (removed > 0) log.info({ queue: queue.name, removed }, 'dead jobs past the retention removed');
    } catch (err) {
      log.warn({ err, queue: queue.name }, 'dead-set trim failed; trying again next sweep');
    }
  }

  return {
    start() {
      timer = setInterval(() => void sweep(), DEAD_SWEEP_EVERY_MS);
      // A sweep alone never keeps the process up.
      timer.unref();
    },
    stop() {
      if (timer) clearInterval(timer);
    },
  };
}
