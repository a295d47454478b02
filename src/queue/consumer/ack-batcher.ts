// Collects acks of one queue shard and sends them in bulk: one script call per
// batch instead of one per job, while a call is in flight the next batch
// gathers. A failed flush keeps the acks and tries again; until then the jobs
// stay leased, so a crash here means redelivery, never loss.
import type { ShardKeys } from '../keys.js';
import { type RedisClient, runAck } from '../scripts/scripts.js';
import type { QueueLogger } from '../types.js';

const MAX_BATCH = 1_000;
const RETRY_MS = 200;

export type AckBatcher = {
  add(id: string, token: number): void;
  /** Resolves when everything added so far has been sent (or given up on at `deadline`). */
  drain(deadline: number): Promise<void>;
};

export function createAckBatcher(redis: RedisClient, keys: ShardKeys, log: QueueLogger, onStale: (id: string) => void): AckBatcher {
  let items: { id: string; token: number }[] = [];
  let flushing: Promise<void> | null = null;
  let retryTimer: NodeJS.Timeout | null = null;

  async function flushLoop(): Promise<void> {
    while (items.length > 0) {
      const batch = items.length > MAX_BATCH ? items.splice(0, MAX_BATCH) : items;
      if (batch === items) items = [];
      try {
        const r = await runAck(redis, keys, batch);
        for (const id of r.stale) onStale(id);
      } catch (err) {
        items = batch.concat(items);
        log.warn({ err, keys: keys.jobs, pending: items.length }, 'ack flush failed; retrying');
        await new Promise<void>((res) => {
          retryTimer = setTimeout(res, RETRY_MS);
        });
        retryTimer = null;
      }
    }
  }

  function kick(): void {
    if (flushing) return;
    flushing = flushLoop().finally(() => {
      flushing = null;
      // An add() that landed between the loop's last check and here queued no flush.
      if (items.length > 0) kick();
    });
  }

  return {
    add(id, token) {
      items.push({ id, token });
      // Let the jobs finishing in this tick join the batch.
      if (!flushing) queueMicrotask(kick);
    },
    async drain(deadline) {
      while ((items.length > 0 || flushing) && performance.now() < deadline) {
        kick();
        const f = flushing as Promise<void> | null;
        if (!f) break;
        await Promise.race([f, new Promise((r) => setTimeout(r, Math.max(0, deadline - performance.now())))]);
      }
      if (retryTimer) clearTimeout(retryTimer);
    },
  };
}
