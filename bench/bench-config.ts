// Benchmark settings from the environment, read once. Job counts are the
// issue's figures times BENCH_SCALE so a short run (0.05) finishes in about a minute.
import { randomBytes } from 'node:crypto';
import { loadConfig } from '../src/config.js';

export const SCENARIOS = ['enqueue', 'memory', 'memoryctl', 'claim1', 'claim50', 'claim50ctl', 'lateness1', 'lateness4'] as const;
/**
 * claim50ctl: claim + ack at concurrency 50 with the queue controls in use but
 * not biting (jobs of ten priorities, a rate limit far above the load), beside
 * claim50 without them; memoryctl: storage per pending job with the jobs of
 * ten priorities, beside memory; for the engines that have both (ours, BullMQ).
 */
export const CONTROL_ENGINES: readonly EngineName[] = ['ours', 'bullmq'];
/** The rate limit of claim50ctl: far above any claim rate measured here, so it judges every job and refuses none. */
export const CONTROL_LIMIT = { count: 1_000_000, intervalMs: 1_000 } as const;
export type Scenario = (typeof SCENARIOS)[number];
export const ENGINES = ['ours', 'bullmq', 'pgboss', 'graphile'] as const;
export type EngineName = (typeof ENGINES)[number];
/** The peers that keep their jobs in PostgreSQL (their figures need BENCH_DATABASE_URL). */
export const POSTGRES_ENGINES: readonly EngineName[] = ['pgboss', 'graphile'];
export const ENGINE_LABEL: Record<EngineName, string> = { ours: 'Ours', bullmq: 'BullMQ', pgboss: 'pg-boss', graphile: 'graphile-worker' };

export type BenchConfig = {
  readonly redisUrl: string;
  /** Where the PostgreSQL peers keep their jobs (a database of its own; the run makes it when missing). */
  readonly databaseUrl: string;
  readonly scale: number;
  readonly engines: readonly EngineName[];
  readonly scenarios: readonly Scenario[];
  readonly enqueueJobs: number;
  readonly claimJobs: number;
  readonly latenessJobs: number;
  /** Span over which the lateness jobs fall due (ms). */
  readonly latenessWindowMs: number;
  /** Gap between the end of scheduling and the first due job (ms). */
  readonly latenessLeadMs: number;
  readonly latenessConcurrency: number;
  /** Enqueue delays are spread over this span (ms). */
  readonly enqueueSpreadMs: number;
  readonly chunk: number;
  /** Enqueue chunks in flight at once (default 1: each chunk awaited before the next). */
  readonly enqueueInFlight: number;
  /** Write bench/HISTORY.md and, for a full-size run, BENCHMARKS.md's current figures (default yes). */
  readonly writeReport: boolean;
  /** Unique per run: every key this run writes carries it. */
  readonly runTag: string;
};

function list<T extends string>(raw: string | undefined, allowed: readonly T[], what: string): readonly T[] {
  if (!raw) return allowed;
  const items = raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  for (const item of items) {
    if (!(allowed as readonly string[]).includes(item)) throw new Error(`${what}: unknown "${item}" (allowed: ${allowed.join(', ')})`);
  }
  return allowed.filter((a) => items.includes(a));
}

function num(raw: string | undefined, fallback: number, what: string): number {
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`${what} must be a positive number: ${raw}`);
  return n;
}

/**
 * Whether our queue keeps job records in record groups: BENCH_RECORD_GROUPS=1
 * or 0, or else the service's own default (QUEUE_RECORD_GROUPS in
 * src/config.ts), so the figures describe the layout the service ships.
 */
export function benchRecordGroups(env: NodeJS.ProcessEnv = process.env): boolean {
  const raw = env.BENCH_RECORD_GROUPS;
  if (raw === '1' || raw === '0') return raw === '1';
  if (raw !== undefined && raw !== '') throw new Error(`BENCH_RECORD_GROUPS must be 0 or 1: ${raw}`);
  return loadConfig({}).QUEUE_RECORD_GROUPS === '1';
}

export function readConfig(env: NodeJS.ProcessEnv = process.env): BenchConfig {
  const scale = num(env.BENCH_SCALE, 1, 'BENCH_SCALE');
  const count = (n: number) => Math.max(10, Math.round(n * scale));
  return {
    redisUrl: env.REDIS_URL ?? 'redis://127.0.0.1:6379',
    databaseUrl: env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/ots_bench',
    scale,
    engines: list(env.BENCH_ONLY, ENGINES, 'BENCH_ONLY'),
    scenarios: list(env.BENCH_SCENARIOS, SCENARIOS, 'BENCH_SCENARIOS'),
    enqueueJobs: count(100_000),
    claimJobs: count(50_000),
    latenessJobs: count(20_000),
    latenessWindowMs: num(env.BENCH_LATENESS_WINDOW_MS, 10_000, 'BENCH_LATENESS_WINDOW_MS'),
    latenessLeadMs: 2_000,
    latenessConcurrency: 50,
    enqueueSpreadMs: 60 * 60 * 1000,
    chunk: 1_000,
    enqueueInFlight: Math.floor(num(env.BENCH_ENQUEUE_IN_FLIGHT, 1, 'BENCH_ENQUEUE_IN_FLIGHT')),
    writeReport: env.BENCH_WRITE !== '0',
    runTag: `bench-${randomBytes(4).toString('hex')}`,
  };
}
