// Lateness scenario, parent side: fork N worker processes, wait until they
// are claiming, schedule jobs due evenly over a window starting a lead time
// after scheduling ends, gather every handler-start lateness sample, stop
// the children.
import { type ChildProcess, fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { BenchConfig } from './bench-config.js';
import type { BenchQueue } from './bench-engine.js';
import { type Percentiles, log, percentiles, round, until } from './bench-util.js';
import type { ChildArgs, ChildMessage } from './lateness-worker.js';

const CHILD = fileURLToPath(new URL('./lateness-worker.ts', import.meta.url));
const REPO_ROOT = fileURLToPath(new URL('..', import.meta.url));
// Conservative scheduling rates (jobs/s) used to place the first due time
// after scheduling ends; the lead actually achieved is reported.
const ASSUMED_RATE = { ours: 40_000, bullmq: 5_000, pgboss: 2_000, graphile: 2_000 } as const;

export type LatenessResult = {
  processes: number;
  concurrency: number;
  jobs: number;
  windowMs: number;
  /** First due time minus end of scheduling (ms); the target is cfg.latenessLeadMs. */
  achievedLeadMs: number;
  wall: Percentiles | null;
  /** Our worker's own (Redis-clock) estimate, ours only. */
  engine: Percentiles | null;
  perProcess: number[];
};

type Child = { proc: ChildProcess; ready: Promise<void>; exited: Promise<void>; samples: number };

function spawnChild(args: ChildArgs, onSamples: (m: Extract<ChildMessage, { type: 'samples' }>) => void): Child {
  const proc = fork(CHILD, [JSON.stringify(args)], {
    cwd: REPO_ROOT,
    execArgv: ['--import', 'tsx'],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const child: Child = { proc, samples: 0, ready: Promise.resolve(), exited: Promise.resolve() };
  child.exited = new Promise((resolve) => proc.once('exit', () => resolve()));
  child.ready = new Promise((resolve, reject) => {
    proc.once('exit', (code) => reject(new Error(`lateness worker exited early (code ${code})`)));
    proc.on('message', (m: ChildMessage) => {
      if (m.type === 'ready') resolve();
      else if (m.type === 'error') reject(new Error(`lateness worker failed: ${m.message}`));
      else if (m.type === 'samples') {
        child.samples += m.wall.length;
        onSamples(m);
      }
    });
  });
  child.ready.catch(() => {});
  return child;
}

async function stopChild(c: Child): Promise<void> {
  if (c.proc.exitCode !== null || !c.proc.connected) return;
  c.proc.send({ type: 'stop' });
  const t = setTimeout(() => c.proc.kill('SIGKILL'), 20_000);
  await c.exited;
  clearTimeout(t);
}

export async function measureLateness(cfg: BenchConfig, queue: BenchQueue, processes: number): Promise<LatenessResult> {
  const n = cfg.latenessJobs;
  const wall: number[] = [];
  const engine: number[] = [];
  const args: ChildArgs = { stores: cfg, ids: queue.ids, concurrency: cfg.latenessConcurrency, processes };
  const children = Array.from({ length: processes }, () =>
    spawnChild(args, (m) => {
      for (const v of m.wall) wall.push(v);
      for (const v of m.engine) engine.push(v);
    }),
  );
  try {
    await Promise.all(children.map((c) => c.ready));
    const schedStart = Date.now();
    const firstDue = schedStart + cfg.latenessLeadMs + Math.ceil((n / ASSUMED_RATE[queue.ids.engine]) * 1000);
    const step = cfg.latenessWindowMs / n;
    for (let i = 0; i < n; i += cfg.chunk) {
      const chunk = [];
      for (let k = i; k < Math.min(n, i + cfg.chunk); k++) chunk.push({ n: k, dueAt: Math.round(firstDue + k * step) });
      await queue.addAt(chunk);
    }
    const achievedLeadMs = firstDue - Date.now();
    log(`  ${queue.ids.engine} lateness x${processes}: scheduled ${n} jobs, first due in ${achievedLeadMs} ms`);
    const timeout = achievedLeadMs + cfg.latenessWindowMs + 60_000;
    await until(() => wall.length >= n, timeout, `${n} lateness samples`, 50);
    await Promise.all(children.map(stopChild));
    const c = await queue.counts();
    if (c.waiting + c.active > 0) throw new Error(`queue not empty after lateness run: ${JSON.stringify(c)}`);
    return {
      processes,
      concurrency: cfg.latenessConcurrency,
      jobs: n,
      windowMs: cfg.latenessWindowMs,
      achievedLeadMs: round(achievedLeadMs, 0),
      wall: percentiles(wall),
      engine: percentiles(engine),
      perProcess: children.map((ch) => ch.samples),
    };
  } finally {
    await Promise.all(children.map(stopChild));
  }
}
