// The engine at size: one shard of our delay queue holding BENCH_SIZE_PENDING
// pending jobs (default 10 000 000). Measured, through the same BenchQueue as
// `npm run bench`:
// - bytes per pending job (INFO used_memory delta over the load, and the sum
//   of MEMORY USAGE over the queue's keys);
// - delayed enqueue (chunks of 1 000, one in flight) and claim + ack of jobs
//   already due (concurrency 50, a no-op handler) with BENCH_SIZE_BASE jobs
//   pending (default 100 000) and again with the shard full;
// - the queue's stats (what /metrics and `npm run stats` read) with
//   BENCH_SIZE_OVERDUE jobs overdue (default 1 000 000) beside them.
// Issue 15's targets: <= 160 B per pending job (goal 120), enqueue and
// claim + ack within 20 % of their figures at 100 000, a stats scrape <= 10 ms.
//
// Run: `npm run bench:size` (Redis at REDIS_URL; about 2 GiB of it at the
// default size; only its own keys, deleted afterwards). Knobs:
// BENCH_SIZE_PENDING, BENCH_SIZE_BASE, BENCH_SIZE_OVERDUE, BENCH_SIZE_CLAIM=50000,
// BENCH_WRITE=0. Prints JSON on stdout; writes a section into BENCHMARKS.md.
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { openOurs } from './ours-engine.js';
import { round, timed, usedMemory } from './bench-util.js';
import { DEFAULT_REDIS_URL, fmt, machineInfo, machineLines, makeLog, num, redisVersion, writeMarkedSection } from './http-harness.js';

const cfg = {
  pending: Math.floor(num('BENCH_SIZE_PENDING', 10_000_000)),
  base: Math.floor(num('BENCH_SIZE_BASE', 100_000)),
  overdue: Math.floor(num('BENCH_SIZE_OVERDUE', 1_000_000)),
  claim: Math.floor(num('BENCH_SIZE_CLAIM', 50_000)),
  write: process.env.BENCH_WRITE !== '0',
  redisUrl: process.env.REDIS_URL ?? DEFAULT_REDIS_URL,
};
const CHUNK = 1_000;
const WARM_UP = 20_000;
const HOUR = 3_600_000;
const log = makeLog('bench:size');

async function main(): Promise<void> {
  const date = new Date().toISOString();
  const admin = new Redis(cfg.redisUrl);
  const q = openOurs(cfg.redisUrl, { engine: 'ours', name: 'size', prefix: `bench_size_${randomBytes(4).toString('hex')}` });
  await q.init();
  let next = 0; // job numbers: each job its own id
  /** Adds `n` jobs due `at(i)` in chunks of 1 000, `lanes` chunks in flight; jobs a second. */
  const add = async (n: number, lanes: number, at: (i: number) => number) => {
    let done = 0;
    const first = next;
    next += n;
    const lane = async () => {
      while (done < n) {
        const from = done;
        done = Math.min(n, done + CHUNK);
        const jobs = [];
        for (let i = from; i < done; i++) jobs.push({ n: first + i, dueAt: at(i) });
        await q.addAt(jobs);
      }
    };
    const t0 = performance.now();
    await Promise.all(Array.from({ length: lanes }, lane));
    return Math.round(n / ((performance.now() - t0) / 1_000));
  };
  // Due one to two hours ahead: never due while the benchmark runs.
  const ahead = (i: number) => Date.now() + HOUR + (i % HOUR);
  const enqueue = () => add(cfg.base, 1, ahead);
  /** Adds cfg.claim due jobs and times a worker (concurrency 50) through them; jobs a second. */
  const claim = async () => {
    await add(cfg.claim, 4, () => Date.now() - 1_000);
    let completed = 0;
    let done!: () => void;
    const all = new Promise<void>((r) => (done = r));
    const w = await q.prepareWorker(50, { onCompleted: () => ++completed === cfg.claim && done() });
    const t0 = performance.now();
    await w.start();
    await all;
    const s = (performance.now() - t0) / 1_000;
    await w.stop();
    return Math.round(cfg.claim / s);
  };
  const stats = () => timed(20, () => q.counts());
  try {
    // Untimed first: the first enqueue and claim of a process pay for its warm-up (JIT, connections).
    await add(WARM_UP, 1, ahead);
    await claim();
    const small = { enqueuePerSec: await enqueue(), claimPerSec: await claim() };
    log(`with ${fmt(cfg.base)} pending: ${JSON.stringify(small)}`);
    const before = await usedMemory(admin);
    const keysBefore = await q.storage();
    const t0 = performance.now();
    const load = cfg.pending - cfg.base;
    const loadPerSec = await add(load, 4, ahead);
    const after = await usedMemory(admin);
    const keysAfter = await q.storage();
    const memory = {
      usedMemoryBytesPerJob: round((after - before) / load, 1),
      keyBytesPerJob: round((keysAfter.bytes - keysBefore.bytes) / load, 1),
      keys: keysAfter.objects,
    };
    log(`loaded ${fmt(load)} in ${round((performance.now() - t0) / 1_000, 1)} s (${fmt(loadPerSec)}/s): ${JSON.stringify(memory)}`);
    const large = { enqueuePerSec: await enqueue(), claimPerSec: await claim() };
    log(`with ${fmt(cfg.pending)} pending: ${JSON.stringify(large)}`);
    const statsPending = await stats();
    await add(cfg.overdue, 4, () => Date.now() - 5_000);
    const statsOverdue = await stats();
    const result = {
      benchmark: 'size',
      date,
      settings: cfg,
      machine: machineInfo({ postgres: 'PostgreSQL not used', redis: await redisVersion(admin) }),
      small,
      large,
      ratios: { enqueue: round(large.enqueuePerSec / small.enqueuePerSec, 2), claim: round(large.claimPerSec / small.claimPerSec, 2) },
      memory,
      statsPending,
      statsOverdue,
    };
    process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
    if (cfg.write) {
      const within = (r: number) => (r >= 0.8 ? 'yes' : 'no');
      const section = [
        `## ${date}`,
        '',
        ...machineLines(result.machine),
        '',
        '| Figure | Value | Target | Met |',
        '|---|---|---|---|',
        `| Bytes per pending job with ${fmt(cfg.pending)} in one shard: used_memory delta / MEMORY USAGE of keys (${fmt(memory.keys)} keys) | ${memory.usedMemoryBytesPerJob} / ${memory.keyBytesPerJob} B | ≤ 160 B (goal 120) | ${memory.usedMemoryBytesPerJob <= 160 ? 'yes' : 'no'} |`,
        `| Enqueue, delayed jobs/s, ${fmt(cfg.base)} / ${fmt(cfg.pending)} pending | ${fmt(small.enqueuePerSec)} / ${fmt(large.enqueuePerSec)} (${result.ratios.enqueue}) | within 20 % | ${within(result.ratios.enqueue)} |`,
        `| Claim + ack of ${fmt(cfg.claim)} due jobs, c50, jobs/s, ${fmt(cfg.base)} / ${fmt(cfg.pending)} pending | ${fmt(small.claimPerSec)} / ${fmt(large.claimPerSec)} (${result.ratios.claim}) | within 20 % | ${within(result.ratios.claim)} |`,
        `| Queue stats (the scrape's read), p50 / max of 20: ${fmt(cfg.pending)} pending | ${statsPending.p50Ms} / ${statsPending.maxMs} ms | | |`,
        `| The same with ${fmt(cfg.overdue)} overdue beside them | ${statsOverdue.p50Ms} / ${statsOverdue.maxMs} ms | ≤ 10 ms | ${statsOverdue.maxMs <= 10 ? 'yes' : 'no'} |`,
        '',
      ].join('\n');
      const intro = ['How to run: `npm run bench:size` (Redis at `REDIS_URL`, about 2 GiB at the default size); knobs at the top of `bench/size.bench.ts`.'];
      log(`wrote ${writeMarkedSection(section, { heading: '# Engine at size', intro, marker: '<!-- size runs: newest first -->' })}`);
    }
  } finally {
    await q.drop();
    await q.close();
    admin.disconnect();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`bench:size failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
