// Side-by-side benchmark of our delay queue and its peers in the same run
// (BullMQ on the same Redis; pg-boss and graphile-worker on the local
// PostgreSQL): enqueue rate, storage per pending job, claim + ack throughput
// (also with priorities and a rate limit in use, not biting: ours and BullMQ;
// storage also with priorities) and lateness.
// Prints one JSON document on stdout, prepends a section to bench/HISTORY.md and,
// for a full-size run, replaces the queue's rows of BENCHMARKS.md's current figures.
// Settings: see bench-config.ts (BENCH_SCALE, BENCH_ONLY, BENCH_SCENARIOS, BENCH_RECORD_GROUPS, BENCH_WRITE).
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { Redis } from 'ioredis';
import { type BenchConfig, CONTROL_ENGINES, ENGINES, type EngineName, type Scenario, benchRecordGroups, readConfig } from './bench-config.js';
import type { BenchQueue } from './bench-engine.js';
import { infoField, log, round } from './bench-util.js';
import { postgresVersion } from './pg-util.js';
import { measureLateness } from './lateness.js';
import { openEngine, queueIds } from './open-engine.js';
import { writeRun } from './report.js';
import type { EngineResults, RunMeta, RunResults } from './results.js';
import { enqueueDelays, measureClaim, measureEnqueue } from './throughput.js';

const open = new Set<BenchQueue>();

/** Opens a fresh queue for one (scenario, engine), runs `fn`, and always deletes its keys. */
async function withQueue<T>(cfg: BenchConfig, engine: EngineName, scenario: string, fn: (q: BenchQueue) => Promise<T>, controls = false): Promise<T> {
  const q = openEngine(cfg, queueIds(engine, cfg.runTag, scenario), controls);
  open.add(q);
  try {
    await q.init();
    return await fn(q);
  } finally {
    await q.close().catch(() => {});
    await q.drop();
    open.delete(q);
  }
}

const failed = (err: unknown) => ({ error: err instanceof Error ? err.message : String(err) });

async function runEngine(cfg: BenchConfig, admin: Redis, engine: EngineName, scenario: Scenario, into: EngineResults, delays: number[]) {
  const want = (s: Scenario) => cfg.scenarios.includes(s);
  try {
    switch (scenario) {
      case 'enqueue':
      case 'memory': {
        // One fill serves both figures: memory is measured before the keys are deleted.
        if (scenario === 'memory' && want('enqueue')) return;
        const r = await withQueue(cfg, engine, 'enqueue', (q) => measureEnqueue(cfg, admin, q, delays));
        if (want('enqueue')) into.enqueue = r.enqueue;
        if (want('memory')) into.memory = r.memory;
        const used = r.memory.usedMemoryBytesPerJob === undefined ? '' : `${r.memory.usedMemoryBytesPerJob} B/job used_memory, `;
        log(`  ${engine} enqueue: ${r.enqueue.jobsPerSec} jobs/s, ${used}${r.memory.keyBytesPerJob} B/job in its storage`);
        return;
      }
      case 'memoryctl': {
        if (!CONTROL_ENGINES.includes(engine)) return;
        const r = await withQueue(cfg, engine, scenario, (q) => measureEnqueue(cfg, admin, q, delays), true);
        into.memoryctl = r.memory;
        log(`  ${engine} storage, ten priorities: ${r.memory.keyBytesPerJob} B/job in its storage`);
        return;
      }
      case 'claim1':
      case 'claim50': {
        const c = scenario === 'claim1' ? 1 : 50;
        const r = await withQueue(cfg, engine, scenario, (q) => measureClaim(cfg, q, c));
        into[scenario] = r;
        log(`  ${engine} claim+ack c${c}: ${r.jobsPerSec} jobs/s (handlers done: ${r.completedJobsPerSec} jobs/s)`);
        return;
      }
      case 'claim50ctl': {
        if (!CONTROL_ENGINES.includes(engine)) return;
        const r = await withQueue(cfg, engine, scenario, (q) => measureClaim(cfg, q, 50), true);
        into.claim50ctl = r;
        log(`  ${engine} claim+ack c50, priorities and a rate limit in use: ${r.jobsPerSec} jobs/s (handlers done: ${r.completedJobsPerSec} jobs/s)`);
        return;
      }
      case 'lateness1':
      case 'lateness4': {
        const procs = scenario === 'lateness1' ? 1 : 4;
        const r = await withQueue(cfg, engine, scenario, (q) => measureLateness(cfg, q, procs));
        into[scenario] = r;
        log(`  ${engine} lateness x${procs}: ${JSON.stringify(r.wall)}`);
        return;
      }
    }
  } catch (err) {
    log(`  ${engine} ${scenario} FAILED: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    const f = failed(err);
    if (scenario === 'enqueue' || scenario === 'memory') {
      if (want('enqueue')) into.enqueue = f;
      if (want('memory')) into.memory = f;
    } else into[scenario] = f;
  }
}

function versionOf(pkg: string): string {
  const url = new URL(`../node_modules/${pkg}/package.json`, import.meta.url);
  return (JSON.parse(readFileSync(url, 'utf8')) as { version: string }).version;
}

async function metaOf(cfg: BenchConfig, admin: Redis): Promise<RunMeta> {
  const cpus = os.cpus();
  return {
    date: new Date().toISOString(),
    scale: cfg.scale,
    runTag: cfg.runTag,
    machine: {
      cpu: cpus[0]?.model.trim() ?? 'unknown',
      cores: cpus.length,
      memoryGiB: round(os.totalmem() / 2 ** 30, 1),
      os: `${os.type()} ${os.release()} ${os.arch()}`,
    },
    node: process.version,
    redis: (await infoField(admin, 'server', 'redis_version')) ?? 'unknown',
    // Through the server's own database: the benchmark's may not exist yet.
    postgres: await postgresVersion(cfg.databaseUrl.replace(/\/[^/]*$/, '/postgres')).catch(() => 'PostgreSQL not reached'),
    bullmq: versionOf('bullmq'),
    pgBoss: versionOf('pg-boss'),
    graphileWorker: versionOf('graphile-worker'),
    ioredis: versionOf('ioredis'),
    counts: {
      enqueue: cfg.enqueueJobs,
      enqueueInFlight: cfg.enqueueInFlight,
      claim: cfg.claimJobs,
      lateness: cfg.latenessJobs,
      latenessWindowMs: cfg.latenessWindowMs,
    },
  };
}

type Num = number | undefined;
/** Ours over each peer, per figure: above 1 is better for rates, below 1 for bytes and lateness. */
function ratiosOf(r: RunResults): Record<string, Record<string, Num>> {
  const pick = (e: EngineResults | undefined, path: string): Num => {
    let v: unknown = e;
    for (const p of path.split('.')) v = v && typeof v === 'object' ? (v as Record<string, unknown>)[p] : undefined;
    return typeof v === 'number' ? v : undefined;
  };
  const paths = [
    'enqueue.jobsPerSec',
    'memory.usedMemoryBytesPerJob',
    'memory.keyBytesPerJob',
    'memoryctl.keyBytesPerJob',
    'claim1.jobsPerSec',
    'claim50.jobsPerSec',
    'claim50ctl.jobsPerSec',
  ];
  for (const l of ['lateness1', 'lateness4']) for (const q of ['p50', 'p99', 'p999', 'max']) paths.push(`${l}.wall.${q}`);
  const out: Record<string, Record<string, Num>> = {};
  for (const peer of ENGINES.filter((e) => e !== 'ours')) {
    const ratios: Record<string, Num> = {};
    for (const p of paths) {
      const a = pick(r.ours, p);
      const b = pick(r[peer], p);
      if (a !== undefined && b !== undefined && b !== 0) ratios[p] = round(a / b, 3);
    }
    if (Object.keys(ratios).length > 0) out[peer] = ratios;
  }
  return out;
}

async function main(): Promise<void> {
  const cfg = readConfig();
  const admin = new Redis(cfg.redisUrl, { connectionName: 'bench-admin', maxRetriesPerRequest: null });
  process.once('SIGINT', () => {
    log("interrupted: deleting this run's keys");
    void Promise.allSettled([...open].map((q) => q.drop())).finally(() => process.exit(130));
  });
  const meta = await metaOf(cfg, admin);
  log(`run ${cfg.runTag}: scale ${cfg.scale}, engines ${cfg.engines.join(',')}, scenarios ${cfg.scenarios.join(',')}`);
  const results: RunResults = {};
  for (const e of cfg.engines) results[e] = {};
  const delays = enqueueDelays(cfg);
  for (const scenario of cfg.scenarios) {
    log(`scenario ${scenario}`);
    for (const engine of cfg.engines) await runEngine(cfg, admin, engine, scenario, results[engine] as EngineResults, delays);
  }
  const doc = {
    meta,
    targets: {
      enqueueJobsPerSec: '>= 100000',
      bytesPerPendingJob: '<= 180',
      claim1JobsPerSec: '>= 5000',
      claim50JobsPerSec: '>= 50000',
      latenessMs: { p99: '<= 5', max: '<= 25' },
    },
    results,
    ratiosOursOver: ratiosOf(results),
  };
  process.stdout.write(`${JSON.stringify(doc, null, 2)}\n`);
  if (cfg.writeReport) log(`wrote ${writeRun(meta, results, benchRecordGroups()).join(', ')}`);
  await admin.quit();
}

main().catch((err: unknown) => {
  log(`benchmark failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
  process.exitCode = 1;
});
