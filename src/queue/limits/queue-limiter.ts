// The queue limiter: outbound rate limits per queue, per job type and per
// delivery endpoint, shared by every worker process through Redis (one
// script judges a job against its three buckets, lua/limits/admit.lua), and
// an endpoint's slow-down when its receiver answers 429 or 503 with
// Retry-After (lua/limits/slow-down.lua). The rules are the configuration's,
// overridden per scope by the run-time ones kept in Redis, which every
// process re-reads about once a second.
import { type QueueLimitKeys, queueLimitKeys } from '../keys.js';
import type { RedisClient } from '../redis-client.js';
import { type BucketLimit, runAdmit, runSlowDown } from '../scripts/limit-scripts.js';
import type { QueueLogger } from '../types.js';
import { type Limit, type LimitRule, bucketOf, endpointScope, formatLimit, parseLimit } from './limit-rules.js';

/** How a receiver's 429/503 slows its endpoint: the hold capped, the halvings bounded, one undone per recovery step. */
export type AdaptiveOptions = { readonly maxHoldMs: number; readonly maxHalvings: number; readonly recoveryMs: number };
export const DEFAULT_ADAPTIVE: AdaptiveOptions = { maxHoldMs: 60_000, maxHalvings: 4, recoveryMs: 10_000 };
export const DEFAULT_HORIZON_MS = 60_000;
export const DEFAULT_SLOWED_LIMIT: Limit = { count: 10, intervalMs: 1_000 };

export type QueueLimiterOptions = {
  readonly redis: RedisClient;
  /** The queues' key prefix (QUEUE_PREFIX). */
  readonly prefix: string;
  /** The configuration's rules (QUEUE_RATE_LIMITS). */
  readonly rules?: readonly LimitRule[];
  readonly adaptive?: AdaptiveOptions;
  /** The furthest turn a refused job is booked (ms); further, it is judged again then. Default 60 s. */
  readonly horizonMs?: number;
  /** How a slowed endpoint with no rule of its own is spaced before its halvings. Default 10/1s. */
  readonly slowedDefault?: Limit;
  /** How often the run-time rules and slowed endpoints are re-read (ms). Default 1 s. */
  readonly refreshMs?: number;
  readonly log: QueueLogger;
};

/** An endpoint slowed down: no admission before `until` (ms), then its rate halved `level` times, recovering. */
export type Slowed = { readonly until: number; readonly level: number };

/** What the limiter judged for one job: run it now, or come back in `waitMs`. */
export type Admission = { readonly ok: true } | { readonly ok: false; readonly waitMs: number };

export type QueueLimiter = {
  /** Reads the run-time rules once, then every refreshMs. */
  start(): Promise<void>;
  stop(): void;
  /** Whether any rule or slow-down may concern a job of `queue` (local, no Redis). */
  concerns(queue: string): boolean;
  /** Whether jobs need their endpoint worked out: an endpoint rule or a slow-down exists. */
  endpointsInUse(): boolean;
  /** Judges one job; a turn's jobs of one queue, type and endpoint share one script call. */
  admit(queue: string, type: string, endpoint: string | null, jobId: string): Promise<Admission>;
  /** A receiver of `endpoint` asked for `retryAfterMs` of quiet (429/503). */
  slowDown(endpoint: string, retryAfterMs: number): Promise<Slowed>;
  /** The rules in force: the configuration's, the run-time ones, and their union (run-time wins). */
  rules(): { configured: readonly LimitRule[]; runtime: readonly LimitRule[]; effective: readonly LimitRule[] };
  /** Endpoints slowed down now, as last read (about a second old at most). */
  slowed(): ReadonlyMap<string, Slowed>;
  /** Re-reads the run-time rules and slow-downs now. */
  refresh(): Promise<void>;
  readonly keys: QueueLimitKeys;
  readonly adaptive: AdaptiveOptions;
};

/** Field of the run-time rules HASH saying they were loaded from PostgreSQL (absent: Redis lost them). */
export const RULES_LOADED_FIELD = '__loaded';

export function createQueueLimiter(o: QueueLimiterOptions): QueueLimiter {
  const keys = queueLimitKeys(o.prefix);
  const adaptive = o.adaptive ?? DEFAULT_ADAPTIVE;
  const configured = [...(o.rules ?? [])];
  let runtime: LimitRule[] = [];
  let effective = new Map<string, Limit>(configured.map((r) => [r.scope, r]));
  let slowed = new Map<string, Slowed>();
  let queuesLimited = new Set<string>();
  let endpointRules = false;
  let timer: NodeJS.Timeout | undefined;

  function apply(rt: LimitRule[], sl: Map<string, Slowed>): void {
    runtime = rt;
    effective = new Map<string, Limit>([...configured, ...rt].map((r) => [r.scope, { count: r.count, intervalMs: r.intervalMs }]));
    slowed = sl;
    queuesLimited = new Set([...effective.keys()].filter((s) => !s.startsWith('endpoint:')).map((s) => s.split(':')[0] as string));
    endpointRules = [...effective.keys()].some((s) => s.startsWith('endpoint:'));
  }

  async function refresh(): Promise<void> {
    const [fields, ends] = await Promise.all([o.redis.hgetall(keys.rules), o.redis.zrangebyscore(keys.slowed, Date.now(), '+inf', 'WITHSCORES')]);
    const rt: LimitRule[] = [];
    for (const [scope, text] of Object.entries(fields)) {
      if (scope === RULES_LOADED_FIELD) continue;
      try {
        rt.push({ scope, ...parseLimit(text) });
      } catch (err) {
        o.log.warn({ err, scope }, 'run-time rate limit unreadable; ignored');
      }
    }
    const sl = new Map<string, Slowed>();
    const names = ends.filter((_, i) => i % 2 === 0);
    const states = await Promise.all(names.map((e) => o.redis.hmget(keys.slow(e), 'until', 'level')));
    names.forEach((e, i) => {
      const [until, level] = states[i] as (string | null)[];
      if (until != null) sl.set(e, { until: Number(until), level: Number(level ?? 0) });
    });
    apply(rt, sl);
  }

  const bucket = (scope: string): BucketLimit | undefined => {
    const l = effective.get(scope);
    return l && bucketOf(scope, l);
  };

  // A turn's jobs of one queue, type and endpoint: one script call, the
  // answers handed out in the order asked.
  type Waiting = { member: string; resolve: (a: Admission) => void; reject: (e: unknown) => void };
  const admitOptions = {
    recoveryMs: adaptive.recoveryMs,
    horizonMs: o.horizonMs ?? DEFAULT_HORIZON_MS,
    slowedIntervalUs: bucketOf('', o.slowedDefault ?? DEFAULT_SLOWED_LIMIT).intervalUs,
  };
  const pending = new Map<string, { queue: string; type: string; endpoint: string | null; waiting: Waiting[] }>();

  async function judge(g: { queue: string; type: string; endpoint: string | null; waiting: Waiting[] }): Promise<void> {
    let waits: number[];
    try {
      waits = await runAdmit(
        o.redis,
        keys,
        g.waiting.map((w) => w.member),
        {
          queue: bucket(g.queue),
          type: bucket(`${g.queue}:${g.type}`),
          endpoint: g.endpoint === null ? undefined : bucket(endpointScope(g.endpoint)),
          endpointName: g.endpoint,
        },
        admitOptions,
      );
    } catch (err) {
      for (const w of g.waiting) w.reject(err);
      return;
    }
    g.waiting.forEach((w, i) => {
      const ms = waits[i] ?? 0;
      w.resolve(ms <= 0 ? { ok: true } : { ok: false, waitMs: ms });
    });
  }

  return {
    keys,
    adaptive,
    async start() {
      await refresh();
      const loop = () => {
        timer = setTimeout(() => {
          refresh()
            .catch((err: unknown) => o.log.warn({ err }, 'rate limits not re-read; keeping the last ones'))
            .finally(() => timer !== undefined && loop());
        }, o.refreshMs ?? 1_000);
        timer.unref();
      };
      loop();
    },
    stop() {
      clearTimeout(timer);
      timer = undefined;
    },
    concerns: (queue) => queuesLimited.has(queue) || endpointRules || slowed.size > 0,
    endpointsInUse: () => endpointRules || slowed.size > 0,
    admit(queue, type, endpoint, jobId) {
      // Nothing limits it and its endpoint is not slowed: no call.
      const limited = effective.has(queue) || effective.has(`${queue}:${type}`);
      if (!limited && (endpoint === null || (!effective.has(endpointScope(endpoint)) && !slowed.has(endpoint)))) return Promise.resolve({ ok: true });
      return new Promise<Admission>((resolve, reject) => {
        const id = `${queue}\n${type}\n${endpoint ?? ''}`;
        let g = pending.get(id);
        if (!g) {
          const group = { queue, type, endpoint, waiting: [] as Waiting[] };
          pending.set(id, group);
          g = group;
          queueMicrotask(() => {
            pending.delete(id);
            void judge(group);
          });
        }
        // The booking's member: a job id is unique within its queue.
        g.waiting.push({ member: `${queue}:${jobId}`, resolve, reject });
      });
    },
    async slowDown(endpoint, retryAfterMs) {
      const hold = Math.min(Math.max(1, Math.ceil(retryAfterMs)), adaptive.maxHoldMs);
      const s = await runSlowDown(o.redis, keys, endpoint, hold, adaptive.maxHalvings, adaptive.recoveryMs);
      // Known here at once; the other processes read it within a refresh.
      slowed = new Map(slowed).set(endpoint, s);
      o.log.warn({ endpoint, holdMs: hold, until: s.until, halvings: s.level }, 'receiver asked to slow down; endpoint held, then slowed');
      return s;
    },
    rules: () => ({ configured, runtime, effective: [...effective].map(([scope, l]) => ({ scope, ...l })) }),
    slowed: () => slowed,
    refresh,
  };
}

/** The halvings of an endpoint's rate in force at `now` (ms): all of them during the hold, one fewer per recovery step after. */
export function halvingsAt(s: Slowed, recoveryMs: number, now: number): number {
  return now < s.until ? s.level : Math.max(0, s.level - Math.floor((now - s.until) / recoveryMs));
}

/** Whether the slow-down is over at `now`: hold ended and every halving recovered. */
export const slowDownOver = (s: Slowed, recoveryMs: number, now: number) => now >= s.until && halvingsAt(s, recoveryMs, now) === 0;

/** A rule as the run-time HASH keeps it. */
export const ruleField = (r: LimitRule) => [r.scope, formatLimit(r)] as const;
