// Scale-out benchmark: claim + ack throughput and lateness of our queue with
// 1, 2 and 4 worker processes, on one Redis (REDIS_URL) and on a 3-master
// Redis Cluster this script starts from the installed redis-server (loopback,
// no persistence, removed afterwards). Prints one JSON document on stdout and
// inserts a section into bench/HISTORY.md under "# Scale-out benchmark".
//
// Run: `npm run bench:scale`. Knobs (environment):
//   BENCH_SCALE=1            multiplies the job counts (0.1 for a quick run)
//   BENCH_PROCESSES=1,2,4    worker process counts
//   BENCH_TARGETS=single,cluster
//   BENCH_SHARDS=4           queue shards (job id hash mod shards), on both targets
//   BENCH_WRITE=0            do not touch bench/HISTORY.md
import { type ChildProcess, fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { createRedis } from '../src/core/redis.js';
import { type Queue, createQueue } from '../src/queue/producer/queue.js';
import { type TestCluster, startRedisCluster } from '../test/helpers/redis-cluster.js';
import { type Percentiles, log, percentiles, round, until } from './bench-util.js';
import { DEFAULT_REDIS_URL, fmt, machineInfo, machineLines, nums, num, redisVersion, writeMarkedSection } from './http-harness.js';
import type { ScaleChildArgs, ScaleChildMessage } from './scale-worker.js';

const CHILD = fileURLToPath(new URL('./scale-worker.ts', import.meta.url));
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const HEADING = '# Scale-out benchmark';
const MARKER = '<!-- scale runs: newest first -->';

const scale = num('BENCH_SCALE', 1);
const cfg = {
  redisUrl: process.env.REDIS_URL ?? DEFAULT_REDIS_URL,
  processes: nums('BENCH_PROCESSES', [1, 2, 4]),
  targets: (process.env.BENCH_TARGETS ?? 'single,cluster').split(',').filter((t): t is 'single' | 'cluster' => t === 'single' || t === 'cluster'),
  shards: Math.floor(num('BENCH_SHARDS', 4)),
  claimJobs: Math.round(50_000 * scale),
  latenessJobs: Math.round(20_000 * scale),
  latenessWindowMs: 10_000,
  latenessLeadMs: 2_000,
  concurrency: 50,
  write: process.env.BENCH_WRITE !== '0',
};
const runTag = `scale-${randomBytes(3).toString('hex')}`;

type Target = { name: 'single' | 'cluster'; url: string; clusterNodes?: { host: string; port: number }[] };
type Row = { target: string; processes: number; claimJobsPerSec: number; claimSeconds: number; lateness: Percentiles | null; perProcess: number[] };

type Child = { proc: ChildProcess; ready: Promise<void>; exited: Promise<void>; completed: number };

function spawn(args: ScaleChildArgs, onLateness: (v: number[]) => void): Child {
  const proc = fork(CHILD, [JSON.stringify(args)], { cwd: ROOT, execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const c: Child = { proc, completed: 0, ready: Promise.resolve(), exited: new Promise((r) => proc.once('exit', () => r())) };
  c.ready = new Promise((resolve, reject) => {
    proc.once('exit', (code) => reject(new Error(`scale worker exited (code ${code})`)));
    proc.on('message', (m: ScaleChildMessage) => {
      if (m.type === 'ready') resolve();
      else if (m.type === 'error') reject(new Error(m.message));
      else if (m.type === 'progress') {
        c.completed += m.completed;
        onLateness(m.lateness);
      }
    });
  });
  c.ready.catch(() => {});
  return c;
}

async function stop(c: Child): Promise<void> {
  if (c.proc.exitCode !== null || !c.proc.connected) return;
  c.proc.send({ type: 'stop' });
  const t = setTimeout(() => c.proc.kill('SIGKILL'), 20_000);
  await c.exited;
  clearTimeout(t);
}

async function schedule(queue: Queue, n: number, at: (i: number) => number): Promise<void> {
  for (let i = 0; i < n; i += 1_000) {
    const jobs = [];
    for (let k = i; k < Math.min(n, i + 1_000); k++) jobs.push({ id: `j${k}`, type: 'noop', payload: { p: 'abcdefghijkl' }, at: at(k) });
    await queue.scheduleMany(jobs);
  }
}

async function empty(queue: Queue): Promise<boolean> {
  const s = await queue.stats();
  return s.pending === 0 && s.inFlight === 0;
}

/** One scenario pair (claim throughput, then lateness) for one target and process count. */
async function measure(target: Target, processes: number): Promise<Row> {
  const redis = createRedis(target, 'bench-scale-producer');
  const name = `${runTag}-p${processes}`;
  const queue = createQueue(redis, { name, prefix: 'dq', shards: cfg.shards, types: { noop: {} } });
  const args = (): ScaleChildArgs => ({
    url: target.url,
    clusterNodes: target.clusterNodes,
    prefix: 'dq',
    name,
    shards: cfg.shards,
    concurrency: cfg.concurrency,
  });
  try {
    // Claim + ack: every job due before the workers start; timed from 'go' until Redis holds none.
    const now = Date.now();
    await schedule(queue, cfg.claimJobs, (k) => now - 1_000 + (k % 1_000));
    let children = Array.from({ length: processes }, () => spawn(args(), () => {}));
    await Promise.all(children.map((c) => c.ready));
    const t0 = performance.now();
    for (const c of children) c.proc.send({ type: 'go' });
    await until(async () => children.reduce((a, c) => a + c.completed, 0) >= cfg.claimJobs && (await empty(queue)), 120_000, 'claim run', 5);
    const claimMs = performance.now() - t0;
    const perProcess = children.map((c) => c.completed);
    await Promise.all(children.map(stop));

    // Lateness: workers asleep first, then jobs due evenly over the window.
    const samples: number[] = [];
    children = Array.from({ length: processes }, () => spawn(args(), (v) => samples.push(...v)));
    await Promise.all(children.map((c) => c.ready));
    for (const c of children) c.proc.send({ type: 'go' });
    const first = Date.now() + cfg.latenessLeadMs;
    const step = cfg.latenessWindowMs / cfg.latenessJobs;
    await schedule(queue, cfg.latenessJobs, (k) => Math.round(first + k * step));
    await until(() => samples.length >= cfg.latenessJobs, cfg.latenessLeadMs + cfg.latenessWindowMs + 60_000, 'lateness run', 50);
    await Promise.all(children.map(stop));
    if (!(await empty(queue))) throw new Error('queue not empty after the lateness run');
    return {
      target: target.name,
      processes,
      claimJobsPerSec: Math.round((cfg.claimJobs / claimMs) * 1_000),
      claimSeconds: round(claimMs / 1_000, 2),
      lateness: percentiles(samples),
      perProcess,
    };
  } finally {
    redis.disconnect();
  }
}

function section(rows: Row[], machine: string[]): string {
  const lines = [
    `## Scale-out — ${new Date().toISOString()}`,
    '',
    ...machine,
    `- Queue: ${cfg.shards} shards; worker processes at concurrency ${cfg.concurrency}, each on its own connections; claim + ack: ${fmt(cfg.claimJobs)} due jobs (no-op handler), timed until Redis holds none; lateness: ${fmt(cfg.latenessJobs)} jobs due evenly over ${cfg.latenessWindowMs / 1_000} s, start minus due (ms, wall clock)`,
    '- Cluster: 3 masters from redis-server on loopback, no replicas, started by the benchmark; all processes share the 2 cores with them',
    '',
    '| Redis | Worker processes | Claim + ack (jobs/s) | Lateness p50 | p99 | p99.9 | max | Jobs per process (claim run) |',
    '|---|---:|---:|---:|---:|---:|---:|---|',
    ...rows.map(
      (r) =>
        `| ${r.target} | ${r.processes} | ${fmt(r.claimJobsPerSec)} | ${r.lateness?.p50 ?? '-'} | ${r.lateness?.p99 ?? '-'} | ${r.lateness?.p999 ?? '-'} | ${r.lateness?.max ?? '-'} | ${r.perProcess.map(fmt).join(' / ')} |`,
    ),
  ];
  return lines.join('\n');
}

async function main(): Promise<void> {
  log(`scale benchmark ${runTag}: targets ${cfg.targets.join(', ')}, processes ${cfg.processes.join(', ')}, scale ${scale}`);
  const rows: Row[] = [];
  let cluster: TestCluster | undefined;
  try {
    for (const t of cfg.targets) {
      let target: Target = { name: 'single', url: cfg.redisUrl };
      if (t === 'cluster') {
        cluster = await startRedisCluster(3);
        target = { name: 'cluster', url: 'redis://127.0.0.1', clusterNodes: cluster.nodes };
        log(`  cluster up: ${cluster.seeds}`);
      }
      for (const p of cfg.processes) {
        const r = await measure(target, p);
        log(`  ${r.target} x${p}: claim+ack ${r.claimJobsPerSec} jobs/s; lateness p50 ${r.lateness?.p50} p99 ${r.lateness?.p99} max ${r.lateness?.max} ms`);
        rows.push(r);
      }
      if (cluster) {
        await cluster.stop();
        cluster = undefined;
      }
    }
  } finally {
    await cluster?.stop();
  }
  const probe = new Redis(cfg.redisUrl);
  const machine = machineInfo({ postgres: '-', redis: await redisVersion(probe) });
  probe.disconnect();
  const doc = { runTag, config: cfg, machine, rows };
  process.stdout.write(`${JSON.stringify(doc, null, 2)}\n`);
  if (cfg.write) {
    const intro = [
      'How to run: `npm run bench:scale` (one Redis at `REDIS_URL`; the 3-master cluster is started by the script).',
      'Short runs: `BENCH_SCALE=0.1`; `BENCH_PROCESSES=1,2,4`; `BENCH_TARGETS=single,cluster`; `BENCH_WRITE=0` skips this file.',
    ];
    const m = machineLines(machine).filter((l) => !l.startsWith('- Node'));
    m.push(`- Node ${machine.node}, Redis ${machine.redis}`);
    writeMarkedSection(section(rows, m), { heading: HEADING, intro, marker: MARKER });
    log('bench/HISTORY.md updated');
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
