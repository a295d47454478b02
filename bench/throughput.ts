// Enqueue (with the Redis memory it costs) and claim + ack throughput, run
// in this process against one BenchQueue.
import type { Redis } from 'ioredis';
import type { BenchConfig } from './bench-config.js';
import type { BenchQueue } from './bench-engine.js';
import { round, seededRandom, until, usedMemory } from './bench-util.js';

export type EnqueueResult = { jobs: number; chunk: number; chunksInFlight: number; seconds: number; jobsPerSec: number };
export type MemoryResult = {
  jobs: number;
  /** INFO used_memory after minus before, per job (other clients of this Redis add noise); Redis engines only. */
  usedMemoryBytesPerJob?: number;
  /**
   * What the queue's storage grew by, per job: MEMORY USAGE over its keys
   * (Redis, blind to other clients), or its tables with indexes and TOAST (PostgreSQL).
   */
  keyBytesPerJob: number;
  /** Keys (Redis) or tables (PostgreSQL) the queue holds. */
  keys: number;
};
export type ClaimResult = {
  jobs: number;
  concurrency: number;
  /** Until the last handler finished ("handlers done": BullMQ and ours after the ack, the PostgreSQL peers before their completion is written). */
  completedSeconds: number;
  completedJobsPerSec: number;
  /** Until the queue is empty in Redis (our acks are batched; BullMQ's 'completed' follows its ack). */
  drainedSeconds: number;
  jobsPerSec: number;
};

const perSec = (jobs: number, ms: number) => round(jobs / (ms / 1000), 0);

/** Delays spread over cfg.enqueueSpreadMs in a fixed pseudo-random order, the same for every engine. */
export function enqueueDelays(cfg: BenchConfig): number[] {
  const rnd = seededRandom(42);
  return Array.from({ length: cfg.enqueueJobs }, () => 60_000 + Math.floor(rnd() * cfg.enqueueSpreadMs));
}

export async function measureEnqueue(
  cfg: BenchConfig,
  admin: Redis,
  queue: BenchQueue,
  delays: readonly number[],
): Promise<{ enqueue: EnqueueResult; memory: MemoryResult }> {
  const n = delays.length;
  const redis = queue.store === 'redis';
  const stored = await queue.storage();
  const before = redis ? await usedMemory(admin) : 0;
  let next = 0;
  // Each lane sends its chunk and waits for the reply before taking the next.
  const lane = async () => {
    while (next < n) {
      const i = next;
      next = Math.min(n, next + cfg.chunk);
      const chunk = [];
      for (let k = i; k < next; k++) chunk.push({ n: k, delayMs: delays[k] as number });
      await queue.addDelayed(chunk);
    }
  };
  const t0 = performance.now();
  await Promise.all(Array.from({ length: cfg.enqueueInFlight }, lane));
  const ms = performance.now() - t0;
  const after = redis ? await usedMemory(admin) : 0;
  const c = await queue.counts();
  if (c.waiting !== n) throw new Error(`expected ${n} pending jobs after enqueue, found ${c.waiting}`);
  const km = await queue.storage();
  return {
    enqueue: { jobs: n, chunk: cfg.chunk, chunksInFlight: cfg.enqueueInFlight, seconds: round(ms / 1000, 3), jobsPerSec: perSec(n, ms) },
    memory: {
      jobs: n,
      ...(redis ? { usedMemoryBytesPerJob: round((after - before) / n, 1) } : {}),
      keyBytesPerJob: round((km.bytes - stored.bytes) / n, 1),
      keys: km.objects,
    },
  };
}

export async function measureClaim(cfg: BenchConfig, queue: BenchQueue, concurrency: number): Promise<ClaimResult> {
  const n = cfg.claimJobs;
  for (let i = 0; i < n; i += cfg.chunk) {
    const ns = [];
    for (let k = i; k < Math.min(n, i + cfg.chunk); k++) ns.push(k);
    await queue.addDue(ns);
  }
  let done = 0;
  let allDone: () => void = () => {};
  const finished = new Promise<void>((r) => (allDone = r));
  const worker = await queue.prepareWorker(concurrency, {
    onCompleted() {
      if (++done === n) allDone();
    },
  });
  const timeoutMs = 60_000 + n * 5; // >= 200 jobs/s or the run is broken
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`claim c${concurrency}: only ${done}/${n} completed in ${timeoutMs} ms`)), timeoutMs);
  });
  try {
    const t0 = performance.now();
    await worker.start();
    await Promise.race([finished, timeout]);
    const t1 = performance.now();
    await until(
      async () => {
        const c = await queue.counts();
        return c.waiting === 0 && c.active === 0;
      },
      30_000,
      'the queue to drain',
      10,
    );
    const t2 = performance.now();
    return {
      jobs: n,
      concurrency,
      completedSeconds: round((t1 - t0) / 1000, 3),
      completedJobsPerSec: perSec(n, t1 - t0),
      drainedSeconds: round((t2 - t0) / 1000, 3),
      jobsPerSec: perSec(n, t2 - t0),
    };
  } finally {
    clearTimeout(timer);
    await worker.stop();
  }
}
