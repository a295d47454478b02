// Prometheus metrics (prom-client): what the queues do, how late jobs start,
// how long handlers and HTTP requests take, queue depths read at scrape time,
// and parcel batches by reason. One registry per service instance.
import type { RequestHandler } from 'express';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { halvingsAt, slowDownOver, withTimeout, type Queue, type QueueLimiter, type WorkerEvent } from '../queue/index.js';

const LATENESS_BUCKETS = [0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
const DURATION_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
/**
 * How long a scrape waits for the queue depths from Redis. A hung or lost
 * Redis must not cost the whole scrape (process figures included) exactly
 * when it matters: the depths are then left out and ots_queue_stats_up is 0.
 */
const QUEUE_STATS_TIMEOUT_MS = 500;
/**
 * An exposition is served to every scrape for this long after it was made, and
 * one is made at a time: a flood of scrapes costs one collection (a stats
 * script per queue shard, ~190 kB of text) a second, not one per request.
 */
const EXPOSITION_CACHE_MS = 1_000;

export type Metrics = ReturnType<typeof createMetrics>;

export function createMetrics() {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'ots_' });
  const c = (name: string, help: string, labelNames: string[]) => new Counter({ name, help, labelNames, registers: [registry] });
  const scheduled = c('ots_jobs_scheduled_total', 'Jobs scheduled (created or moved)', ['queue']);
  const claimed = c('ots_jobs_claimed_total', 'Jobs handed to a worker', ['queue']);
  const acked = c('ots_jobs_completed_total', 'Jobs whose handler succeeded (acked)', ['queue']);
  const retried = c('ots_jobs_retried_total', 'Failed deliveries scheduled for a retry', ['queue']);
  const dead = c('ots_jobs_dead_lettered_total', 'Jobs moved to the dead set', ['queue']);
  const reclaimed = c('ots_jobs_reclaimed_total', 'Jobs taken back after their lease expired', ['queue']);
  const stale = c('ots_jobs_stale_total', 'Acks, nacks or extensions refused because the lease was lost', ['queue', 'op']);
  const batches = c('ots_parcel_batches_total', 'Parcel batches committed', ['reason']);
  const lateness = new Histogram({
    name: 'ots_job_lateness_seconds',
    help: 'Handler start minus due time',
    labelNames: ['queue'],
    buckets: LATENESS_BUCKETS,
    registers: [registry],
  });
  const duration = new Histogram({
    name: 'ots_job_duration_seconds',
    help: 'Handler run time of successful jobs',
    labelNames: ['queue', 'type'],
    buckets: DURATION_BUCKETS,
    registers: [registry],
  });
  const http = new Histogram({
    name: 'ots_http_request_duration_seconds',
    help: 'HTTP request duration by route and status',
    labelNames: ['method', 'route', 'status'],
    buckets: DURATION_BUCKETS,
    registers: [registry],
  });
  let watched: readonly Queue[] = [];
  new Gauge({
    name: 'ots_queue_jobs',
    help: 'Jobs per queue and state, read from Redis at scrape time (missing when ots_queue_stats_up is 0)',
    labelNames: ['queue', 'state'],
    registers: [registry],
    async collect() {
      this.reset();
      let all;
      try {
        all = await withTimeout(Promise.all(watched.map((q) => q.stats())), QUEUE_STATS_TIMEOUT_MS, 'queue depths');
      } catch {
        statsUp.set(0);
        return;
      }
      statsUp.set(1);
      for (const s of all) {
        for (const [state, v] of [
          ['pending', s.pending],
          ['due_now', s.dueNow],
          ['in_flight', s.inFlight],
          ['dead', s.dead],
        ] as const) {
          this.set({ queue: s.queue, state }, v);
        }
      }
    },
  });
  // Registered after ots_queue_jobs, whose collect sets it: a scrape shows this scrape's value.
  const statsUp = new Gauge({
    name: 'ots_queue_stats_up',
    help: '1 when this scrape read the queue depths from Redis in time, 0 when ots_queue_jobs is missing because Redis did not answer',
    registers: [registry],
  });
  new Gauge({
    name: 'ots_queue_paused',
    help: '1 when a queue (type "*") or one of its job types is paused in every shard, 0.5 in some shards only (a pause or resume cut short: the pause check repairs it), else 0 (read from Redis at scrape time; missing when Redis did not answer)',
    labelNames: ['queue', 'type'],
    registers: [registry],
    async collect() {
      this.reset();
      let states;
      try {
        states = await withTimeout(Promise.all(watched.map((q) => q.pauseState())), QUEUE_STATS_TIMEOUT_MS, 'queue pause state');
      } catch {
        return;
      }
      watched.forEach((q, i) => {
        const s = states[i];
        for (const type of ['*', ...q.types]) {
          const all = type === '*' ? s?.queue : s?.types.includes(type);
          this.set({ queue: q.name, type }, all ? 1 : s?.partial.includes(type) ? 0.5 : 0);
        }
      });
    },
  });

  let limiter: QueueLimiter | undefined;
  new Gauge({
    name: 'ots_rate_limit_slowed',
    help: 'Endpoints slowed down after a 429 or 503 with Retry-After: halvings of their rate in force now (present from the signal until fully recovered)',
    labelNames: ['endpoint'],
    registers: [registry],
    collect() {
      this.reset();
      const now = Date.now();
      const recoveryMs = limiter?.adaptive.recoveryMs ?? 1;
      for (const [endpoint, s] of limiter?.slowed() ?? []) {
        if (!slowDownOver(s, recoveryMs, now)) this.set({ endpoint }, halvingsAt(s, recoveryMs, now));
      }
    },
  });

  const collections = new Counter({
    name: 'ots_metrics_collections_total',
    help: 'Expositions collected for /metrics (at most one a second, shared by the scrapes meanwhile)',
    registers: [registry],
  });
  let cached: { text: string; at: number } | undefined;
  let collecting: Promise<string> | undefined;

  return {
    registry,
    /** The text exposition: the cached one when less than EXPOSITION_CACHE_MS old, else the one being collected (started if none is). */
    exposition(): Promise<string> {
      if (cached && Date.now() - cached.at < EXPOSITION_CACHE_MS) return Promise.resolve(cached.text);
      collecting ??= (async () => {
        collections.inc();
        try {
          const text = await registry.metrics();
          // Aged from its end: a slow collection is not followed at once by the next.
          cached = { text, at: Date.now() };
          return text;
        } finally {
          collecting = undefined;
        }
      })();
      return collecting;
    },
    watchQueues(queues: readonly Queue[]): void {
      watched = queues;
    },
    /** The queue limiter whose slowed endpoints ots_rate_limit_slowed shows. */
    watchLimiter(l: QueueLimiter): void {
      limiter = l;
    },
    scheduled(queue: string, n: number): void {
      scheduled.inc({ queue }, n);
    },
    batchCommitted(reason: string, n = 1): void {
      batches.inc({ reason }, n);
    },
    workerEvent(e: WorkerEvent): void {
      switch (e.kind) {
        case 'claimed':
          if (e.count) claimed.inc({ queue: e.queue }, e.count);
          if (e.reclaimed) reclaimed.inc({ queue: e.queue }, e.reclaimed);
          break;
        case 'started':
          lateness.observe({ queue: e.job.queue }, Math.max(0, e.latenessMs) / 1_000);
          break;
        case 'completed':
          acked.inc({ queue: e.job.queue });
          duration.observe({ queue: e.job.queue, type: e.job.type }, e.durationMs / 1_000);
          break;
        case 'retried':
          retried.inc({ queue: e.job.queue });
          break;
        case 'dead':
          dead.inc({ queue: e.job.queue });
          break;
        case 'stale':
          stale.inc({ queue: e.queue, op: e.op });
          break;
      }
    },
    httpMiddleware(): RequestHandler {
      return (req, res, next) => {
        const end = http.startTimer();
        res.on('finish', () => {
          // The route pattern, not the path: ids must not explode the label set.
          const route = req.route ? `${req.baseUrl}${String(req.route.path)}` : 'unmatched';
          end({ method: req.method, route, status: String(res.statusCode) });
        });
        next();
      };
    },
  };
}
