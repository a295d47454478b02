// The consumer side of one delay queue: claims due jobs from every shard in
// batches, runs them on a bounded pool, acks in bulk, retries failures with
// backoff, dead-letters what cannot succeed, and stops gracefully. This file
// wires the parts and owns start and stop.
import { setMaxListeners } from 'node:events';
import { type AckBatcher, createAckBatcher } from './ack-batcher.js';
import { batchLanesOf, createBatchRunner } from './batch-lane.js';
import { type Accept, createIntake } from './intake.js';
import { createFailureHandler } from './job-failure.js';
import { createJobRunner } from './job-runner.js';
import { createLimitGate } from './limit-gate.js';
import { createLeaseExtender } from './lease.js';
import { type Pool, createPool } from './pool.js';
import { type PrefetchBudget, adaptivePrefetch, fixedPrefetch } from './prefetch-budget.js';
import { type ShardPoller, createShardPoller } from './shard-poller.js';
import { createDeadSweeper } from '../producer/dead-sweeper.js';
import type { QueueLimiter } from '../limits/queue-limiter.js';
import type { Queue } from '../producer/queue.js';
import type { RedisClient } from '../scripts/scripts.js';
import { type AnyJobHandler, type QueueLogger, type WorkerEvent, silentLogger } from '../types.js';
import { type ServerClock, createServerClock, localNow } from '../wake/server-clock.js';
import { type WakeListener, type WakeTarget, listenForWakeUps } from '../wake/wake-subscriber.js';
import type { ShardKeys } from '../keys.js';
import { LAYOUT_CHANGED } from '../shard-layout.js';
import { createShardFollower } from './shard-follower.js';

export type WorkerOptions = {
  readonly queue: Queue;
  /** Connection for scripts. */
  readonly redis: RedisClient;
  /** Connection for Pub/Sub (it cannot run other commands); default: a duplicate of redis. */
  readonly subscriber?: RedisClient;
  /** A handler for every job type of the queue: one job at a time, or a batch (JobBatchHandler). */
  readonly handlers: Readonly<Record<string, AnyJobHandler>>;
  /** Handler calls running at once (a batch is one). Default 50. */
  readonly concurrency?: number;
  /**
   * Claimed jobs waiting for a free slot, beyond the running ones. Default:
   * adaptive, from max(concurrency, 20) up to about 50 ms of work at the recent
   * completion rate (at most 1 000); a number fixes it.
   */
  readonly prefetch?: number;
  /** Max jobs per claim call. Default 200. */
  readonly batchSize?: number;
  /** Lease of a claimed job (ms); a job not acked by then is delivered again. Default 30 s. */
  readonly leaseMs?: number;
  /** Longest sleep without a claim, the safety net for a missed wake message (ms). Default 5 s. */
  readonly idleRecheckMs?: number;
  /** How long stop() lets running handlers finish (ms). Default 10 s. */
  readonly shutdownGraceMs?: number;
  /**
   * A claim not answered this long (ms) counts as lost and is tried again; a
   * claim that reaches Redis later than this (on a connection to a server that
   * hung meanwhile) changes nothing there. Keep it below the connection's
   * socket timeout. Default 2 s.
   */
  readonly claimTimeoutMs?: number;
  readonly log?: QueueLogger;
  readonly onEvent?: (e: WorkerEvent) => void;
  /** Outbound rate limits shared by every worker process (queue/limits/); none: no limits. */
  readonly limiter?: QueueLimiter;
};

export type Worker = {
  start(): Promise<void>;
  /** Stop claiming, release unstarted jobs, let running ones finish within the grace period. */
  stop(): Promise<{ released: number; unfinished: number }>;
};

const ABORT_SETTLE_MS = 1_000;
const MAX_PREFETCH = 1_000;
const PREFETCH_WORK_MS = 50;

export function createWorker(o: WorkerOptions): Worker {
  const { queue, redis } = o;
  const log = o.log ?? silentLogger;
  const emit = emitterOf(o, log);
  const concurrency = o.concurrency ?? 50;
  const leaseMs = o.leaseMs ?? 30_000;
  const idleRecheckMs = o.idleRecheckMs ?? 5_000;
  const graceMs = o.shutdownGraceMs ?? 10_000;
  const lanes = batchLanesOf(queue, o.handlers);

  const clock = createServerClock();
  const shutdown = new AbortController();
  // Every running handler may listen to it (a webhook call each): no listener limit.
  setMaxListeners(0, shutdown.signal);
  let stopped: Promise<{ released: number; unfinished: number }> | null = null;
  let wake: WakeListener | null = null;

  const fail = createFailureHandler({ queue, redis, log, emit, shutdown: shutdown.signal });
  const ackerOf = (k: ShardKeys) => createAckBatcher(redis, k, log, (id) => emit({ kind: 'stale', queue: queue.name, id, op: 'ack' }));
  const acks: AckBatcher[] = queue.keys.map(ackerOf);
  const extend = createLeaseExtender({ queue, redis, emit });
  const gate = o.limiter && createLimitGate({ queue, redis, limiter: o.limiter, log });
  const common = { leaseMs, clock, signal: shutdown.signal, extend, fail, emit, gate };
  const runner = createJobRunner({ ...common, queue, redis, handlers: o.handlers, acks });
  const runBatch = createBatchRunner({ ...common, runner });
  // Pollers starved for room claim again once a useful batch fits (pollers is
  // set below; the pool calls this only once jobs have come in).
  const onRoom = () => {
    for (const p of pollers) if (p.starved) p.wakeNow();
  };
  const pool = createPool({ queue, redis, log, concurrency, prefetch: prefetchOf(o, concurrency), lanes, run: runner.run, runBatch, onRoom });
  let pauseHeardAt = Number.NEGATIVE_INFINITY;
  const accept = createIntake({ queue, redis, log, leaseMs, pool, pausedSince: (claimedAt) => claimedAt <= pauseHeardAt });
  const pollerOf = pollersOf(o, { clock, log, leaseMs, idleRecheckMs, pool, accept, emit });
  const pollers = queue.keys.map((_, shard) => pollerOf(shard));
  const deadSweeper = createDeadSweeper(queue, log);
  // Claimed but not started when a pause is announced: handed back (attempt
  // refunded), so within a Pub/Sub round trip only jobs already running go on;
  // so are the jobs of a claim asked before and answered after (intake.ts).
  // Those of types not paused are claimed again at once.
  const handBackOnPause = () => {
    pauseHeardAt = localNow();
    void pool.releaseWaiting().then((n) => {
      if (n > 0) log.info({ queue: queue.name, released: n }, 'queue paused: claimed jobs not started were handed back');
    });
  };

  // A pause announced while the wake connection was down was not heard: once
  // it is back, the pause state is read and, if anything is paused, handed
  // back as on the announcement.
  const handBackIfPaused = () => {
    queue.pauseState().then(
      (s) => (s.queue || s.types.length > 0 || s.partial.length > 0) && handBackOnPause(),
      (err: unknown) => log.warn({ err, queue: queue.name }, 'pause state not read after the wake connection came back'),
    );
  };

  // A new head announces its due time; a pause -1 (lua/queue/pause.lua); a
  // change of the shard count LAYOUT_CHANGED (producer/reshard.ts).
  const targetOf = (shard: number, poller: ShardPoller): WakeTarget => ({
    channel: (queue.keys[shard] as ShardKeys).wake,
    wakeAt: (dueAt) => (dueAt === LAYOUT_CHANGED ? follower.readNow() : dueAt < 0 ? handBackOnPause() : poller.wakeAt(clock.localAt(dueAt))),
    wakeNow: poller.wakeNow,
  });
  const follower = createShardFollower({
    queue,
    log,
    polled: () => pollers.length,
    async addShard(shard) {
      const poller = pollerOf(shard);
      const acker = ackerOf(queue.keys[shard] as ShardKeys);
      // Its acks must find their batcher before its first claim lands.
      acks[shard] = acker;
      try {
        await wake?.add(targetOf(shard, poller));
      } catch (err) {
        await poller.stop();
        throw err;
      }
      // A stop begun meanwhile stopped the pollers listed then: this one is
      // not among them, so it stops here, never listed.
      if (stopped !== null) {
        await poller.stop();
        return;
      }
      pollers[shard] = poller;
    },
  });

  return {
    async start() {
      wake = await listenForWakeUps({
        redis,
        ...(o.subscriber && { subscriber: o.subscriber }),
        targets: pollers.map((p, shard) => targetOf(shard, p)),
        idleRecheckMs,
        log,
        onReconnect: handBackIfPaused,
      });
      follower.start();
      follower.readNow(); // a count changed since this process was configured: its shards at once
      deadSweeper.start();
      log.info({ queue: queue.name, shards: queue.shards, concurrency }, 'worker started');
    },

    stop() {
      // A second stop() (a test harness, a signal during shutdown) waits for the first.
      stopped ??= shutdownOnce();
      return stopped;
    },
  };

  async function shutdownOnce(): Promise<{ released: number; unfinished: number }> {
    pool.close();
    follower.stop();
    deadSweeper.stop();
    await Promise.all(pollers.map((p) => p.stop()));
    const released = await pool.releaseWaiting();
    await wake?.stop();
    const deadline = localNow() + graceMs;
    await pool.settle(graceMs);
    const unfinished = pool.runningJobs();
    if (unfinished > 0) {
      shutdown.abort(new Error('worker shutdown grace period ended'));
      log.warn({ queue: queue.name, unfinished }, 'handlers still running at shutdown; their jobs are released or return after the lease');
      await pool.settle(ABORT_SETTLE_MS); // handlers that honour the signal hand their jobs back
    }
    await Promise.all(acks.map((a) => a.drain(Math.max(deadline, localNow() + 1_000))));
    log.info({ queue: queue.name, released, unfinished }, 'worker stopped');
    return { released, unfinished };
  }
}

/** Reports an event; a listener that throws is logged, never let into the worker's loops. */
function emitterOf(o: WorkerOptions, log: QueueLogger): (e: WorkerEvent) => void {
  return (e) => {
    try {
      o.onEvent?.(e);
    } catch (err) {
      log.error({ err, event: e.kind }, 'worker event listener threw');
    }
  };
}

function prefetchOf(o: WorkerOptions, concurrency: number): PrefetchBudget {
  return o.prefetch !== undefined
    ? fixedPrefetch(o.prefetch)
    : adaptivePrefetch({ base: Math.max(concurrency, 20), max: MAX_PREFETCH, workMs: PREFETCH_WORK_MS });
}

/** A shard's claim loop, asking the pool for room and handing it what it claims. */
function pollersOf(
  o: WorkerOptions,
  d: { clock: ServerClock; log: QueueLogger; leaseMs: number; idleRecheckMs: number; pool: Pool; accept: Accept; emit: (e: WorkerEvent) => void },
): (shard: number) => ShardPoller {
  const { queue, redis } = o;
  return (shard) =>
    createShardPoller({
      redis,
      keys: queue.keys[shard] as ShardKeys,
      shard,
      clock: d.clock,
      log: d.log,
      batchSize: o.batchSize ?? 200,
      leaseMs: d.leaseMs,
      idleRecheckMs: d.idleRecheckMs,
      claimTimeoutMs: o.claimTimeoutMs ?? 2_000,
      priorityAgingMs: queue.priorityAgingMs,
      room: d.pool.room,
      accept: d.accept,
      onClaim: (count, reclaimed) => d.emit({ kind: 'claimed', queue: queue.name, count, reclaimed }),
      onConnectionSuspect: () => redis.disconnect(true),
    });
}
