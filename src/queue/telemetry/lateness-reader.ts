// Reads the per-second lateness summaries the workers' recorders keep in
// Redis (see lateness-recorder.ts) back into a series per queue, with
// quantiles estimated from the buckets, as Prometheus' histogram_quantile does.
import { latenessKeys } from '../keys.js';
import { LATENESS_BUCKETS_MS } from './lateness-recorder.js';
import type { RedisClient } from '../scripts/scripts.js';

export type LatenessPoint = {
  /** Start of the second (ms since epoch). */
  readonly t: number;
  readonly count: number;
  readonly meanMs: number;
  readonly maxMs: number;
  readonly p50Ms: number;
  readonly p95Ms: number;
  readonly p99Ms: number;
};
export type LatenessSeries = { readonly queue: string; readonly points: readonly LatenessPoint[] };

const SECOND = 1_000;
const MINUTE = 60_000;

/**
 * The q-quantile from bucket counts: linear within the bucket it falls in
 * (the open top bucket ends at the observed max), never above the max.
 */
export function quantileOf(buckets: readonly number[], max: number, q: number): number {
  const n = buckets.reduce((a, b) => a + b, 0);
  if (n === 0) return 0;
  const rank = q * n;
  let below = 0;
  for (let i = 0; i < buckets.length; i++) {
    const count = buckets[i] ?? 0;
    if (count > 0 && below + count >= rank) {
      const lower = i === 0 ? 0 : (LATENESS_BUCKETS_MS[i - 1] ?? 0);
      const upper = Math.min(LATENESS_BUCKETS_MS[i] ?? max, max);
      return Math.min(max, Math.max(0, lower + (Math.max(upper, lower) - lower) * ((rank - below) / count)));
    }
    below += count;
  }
  return max;
}

const round = (ms: number) => Math.round(ms * 100) / 100;

export function createLatenessReader(redis: RedisClient, prefix: string) {
  /** Points of one queue's minute, keyed by second (ms since epoch). */
  function parseMinute(minute: number, summary: Record<string, string>, maxes: string[]): Map<number, LatenessPoint> {
    const acc = new Map<number, { n: number; sum: number; max: number; buckets: number[] }>();
    const at = (s: number) => {
      let a = acc.get(s);
      if (!a) acc.set(s, (a = { n: 0, sum: 0, max: 0, buckets: new Array<number>(LATENESS_BUCKETS_MS.length + 1).fill(0) }));
      return a;
    };
    for (const [field, value] of Object.entries(summary)) {
      const m = /^(\d{1,2}):(n|sum|b(\d{1,2}))$/.exec(field);
      if (!m) continue;
      const a = at(Number(m[1]));
      if (m[2] === 'n') a.n = Number(value);
      else if (m[2] === 'sum') a.sum = Number(value);
      else if (Number(m[3]) < a.buckets.length) a.buckets[Number(m[3])] = Number(value);
    }
    for (let i = 0; i + 1 < maxes.length; i += 2) at(Number(maxes[i])).max = Number(maxes[i + 1]);
    const points = new Map<number, LatenessPoint>();
    for (const [s, a] of acc) {
      if (a.n <= 0) continue;
      const t = minute + s * SECOND;
      points.set(t, {
        t,
        count: a.n,
        meanMs: round(a.sum / a.n),
        maxMs: round(a.max),
        p50Ms: round(quantileOf(a.buckets, a.max, 0.5)),
        p95Ms: round(quantileOf(a.buckets, a.max, 0.95)),
        p99Ms: round(quantileOf(a.buckets, a.max, 0.99)),
      });
    }
    return points;
  }

  async function readQueue(queue: string, fromMs: number, toMs: number): Promise<LatenessSeries> {
    const minutes: number[] = [];
    for (let m = fromMs - (fromMs % MINUTE); m <= toMs; m += MINUTE) minutes.push(m);
    const p = redis.pipeline();
    for (const m of minutes) {
      const k = latenessKeys(prefix, queue, m);
      p.hgetall(k.summary);
      p.zrange(k.max, 0, -1, 'WITHSCORES');
    }
    const replies = (await p.exec()) ?? [];
    const points: LatenessPoint[] = [];
    minutes.forEach((m, i) => {
      const [e1, summary] = replies[2 * i] ?? [null, {}];
      const [e2, maxes] = replies[2 * i + 1] ?? [null, []];
      if (e1 || e2) throw e1 ?? e2;
      for (const pt of parseMinute(m, summary as Record<string, string>, maxes as string[]).values()) {
        if (pt.t >= fromMs - (fromMs % SECOND) && pt.t <= toMs) points.push(pt);
      }
    });
    return { queue, points: points.sort((a, b) => a.t - b.t) };
  }

  return {
    /** Each queue's seconds with started jobs in [fromMs, toMs], oldest first. */
    read(queues: readonly string[], fromMs: number, toMs: number): Promise<LatenessSeries[]> {
      return Promise.all(queues.map((q) => readQueue(q, fromMs, toMs)));
    },
  };
}

export type LatenessReader = ReturnType<typeof createLatenessReader>;
