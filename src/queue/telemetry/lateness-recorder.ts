// Per-second lateness summaries (jobs started, total, max, bucket counts) of
// each queue, kept in Redis for a quarter of an hour so an API process can
// chart what workers in other processes saw. Observations are summed in memory
// and written about once a second, a few commands per queue: never a write per
// job on the hot path.
import { withTimeout } from '../timeout.js';
import { latenessKeys } from '../keys.js';
import type { RedisClient } from '../scripts/scripts.js';
import type { QueueLogger, WorkerEvent } from '../types.js';

/** Upper bounds (ms) of the lateness buckets; one more bucket above the last holds the rest. */
export const LATENESS_BUCKETS_MS = [1, 2, 5, 10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000] as const;
/** How long a minute of summaries stays in Redis after its last write. */
export const LATENESS_TTL_MS = 15 * 60_000;
const SECOND = 1_000;
const MINUTE = 60_000;
const STOP_FLUSH_TIMEOUT_MS = 2_000;

type Summary = { n: number; sum: number; max: number; buckets: number[] };

export function bucketOf(latenessMs: number): number {
  const i = LATENESS_BUCKETS_MS.findIndex((le) => latenessMs <= le);
  return i === -1 ? LATENESS_BUCKETS_MS.length : i;
}

export function createLatenessRecorder(o: { redis: RedisClient; prefix: string; log: QueueLogger; flushEveryMs?: number }) {
  const flushEveryMs = o.flushEveryMs ?? SECOND;
  // queue -> second (ms since epoch) -> summary, until the next flush takes it.
  let pending = new Map<string, Map<number, Summary>>();
  let flushing: Promise<void> | null = null;
  let timer: NodeJS.Timeout | null = null;
  let failing = false;

  function observe(queue: string, latenessMs: number, atMs = Date.now()): void {
    const ms = Math.max(0, latenessMs);
    const second = atMs - (atMs % SECOND);
    let perQueue = pending.get(queue);
    if (!perQueue) pending.set(queue, (perQueue = new Map()));
    let s = perQueue.get(second);
    if (!s) perQueue.set(second, (s = { n: 0, sum: 0, max: 0, buckets: new Array<number>(LATENESS_BUCKETS_MS.length + 1).fill(0) }));
    s.n += 1;
    s.sum += ms;
    s.max = Math.max(s.max, ms);
    const b = bucketOf(ms);
    s.buckets[b] = (s.buckets[b] ?? 0) + 1;
  }

  /** While a write hangs (Redis away, commands queued for the reconnect), keep only what could still be read. */
  function prune(now: number): void {
    for (const seconds of pending.values()) {
      for (const second of seconds.keys()) if (second < now - LATENESS_TTL_MS) seconds.delete(second);
    }
  }

  async function write(batch: Map<string, Map<number, Summary>>): Promise<void> {
    // One pipeline per queue: its keys share a hash tag, so this also holds on a Cluster.
    await Promise.all(
      [...batch].map(async ([queue, seconds]) => {
        const p = o.redis.pipeline();
        const minutes = new Set<number>();
        for (const [second, s] of seconds) {
          const minute = second - (second % MINUTE);
          const k = latenessKeys(o.prefix, queue, minute);
          const at = (second - minute) / SECOND;
          minutes.add(minute);
          p.hincrby(k.summary, `${at}:n`, s.n);
          p.hincrbyfloat(k.summary, `${at}:sum`, s.sum);
          s.buckets.forEach((count, i) => count > 0 && p.hincrby(k.summary, `${at}:b${i}`, count));
          // GT: several workers write the same second; the largest lateness stays.
          p.zadd(k.max, 'GT', s.max, String(at));
        }
        for (const minute of minutes) {
          const k = latenessKeys(o.prefix, queue, minute);
          p.pexpire(k.summary, LATENESS_TTL_MS);
          p.pexpire(k.max, LATENESS_TTL_MS);
        }
        const replies = (await p.exec()) ?? [];
        const failed = replies.find(([err]) => err);
        if (failed) throw failed[0];
      }),
    );
  }

  /** Writes what was observed so far. One write at a time; what arrives meanwhile waits for the next. */
  function flush(): Promise<void> {
    if (flushing) {
      prune(Date.now());
      return flushing;
    }
    if (pending.size === 0) return Promise.resolve();
    const batch = pending;
    pending = new Map();
    flushing = write(batch)
      .then(() => {
        if (failing) o.log.info({}, 'lateness summaries written again');
        failing = false;
      })
      .catch((err: unknown) => {
        // Monitoring data: a second lost in a Redis outage is dropped, not queued
        // up without bound. One line per outage, not one per second.
        if (!failing) o.log.warn({ err }, 'lateness summaries not written; dropping them until Redis answers');
        failing = true;
      })
      .finally(() => {
        flushing = null;
      });
    return flushing;
  }

  return {
    observe,
    /** Feed for the workers' onEvent: each started job counts with its lateness. */
    onWorkerEvent(e: WorkerEvent): void {
      if (e.kind === 'started') observe(e.job.queue, e.latenessMs);
    },
    flush,
    start(): void {
      if (timer) return;
      timer = setInterval(() => void flush(), flushEveryMs);
      timer.unref();
    },
    /** Stops the timer and writes the rest, waiting a bounded time (Redis may be gone). */
    async stop(): Promise<void> {
      if (timer) clearInterval(timer);
      timer = null;
      await withTimeout(
        (async () => {
          if (flushing) await flushing;
          await flush();
        })(),
        STOP_FLUSH_TIMEOUT_MS,
        'final lateness flush',
      ).catch((err: unknown) => o.log.warn({ err }, 'last lateness summaries not written'));
    },
  };
}
