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
// Then the jobs the service keeps pending longest, as it writes them (ids,
// types and payloads of order expiries and reminders; BENCH_SIZE_SERVICE of
// each, default 1 000 000), and with payloads that no longer repeat the id
// (a later release's, once no older worker reads it there): bytes per
// pending job of each.
//
// Run: `npm run bench:size` (Redis at REDIS_URL; about 2 GiB of it at the
// default size; only its own keys, deleted afterwards). Knobs:
// BENCH_SIZE_PENDING, BENCH_SIZE_BASE, BENCH_SIZE_OVERDUE, BENCH_SIZE_CLAIM=50000,
// BENCH_SIZE_SERVICE=1000000, BENCH_SIZE_PARTS=engine,service (either), BENCH_RECORD_GROUPS=0 (job
// records in one HASH per shard, the service's default in this release), BENCH_WRITE=0. Prints JSON on stdout; writes a section into BENCHMARKS.md.
import { randomBytes, randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { REMIND_JOB, remindJobId, remindPayload } from '../src/modules/appointments/appointments.service.js';
import { EXPIRE_JOB, expireJobId, expirePayload } from '../src/modules/orders/orders.service.js';
import { createQueue } from '../src/queue/producer/queue.js';
import type { ScheduleInput } from '../src/queue/index.js';
import { openOurs } from './ours-engine.js';
import { dropKeys, infoField, keysStorage, round, timed, usedMemory } from './bench-util.js';
import { DEFAULT_REDIS_URL, fmt, machineInfo, machineLines, makeLog, num, redisVersion, sleep, writeMarkedSection } from './http-harness.js';

const cfg = {
  pending: Math.floor(num('BENCH_SIZE_PENDING', 10_000_000)),
  base: Math.floor(num('BENCH_SIZE_BASE', 100_000)),
  overdue: Math.floor(num('BENCH_SIZE_OVERDUE', 1_000_000)),
  claim: Math.floor(num('BENCH_SIZE_CLAIM', 50_000)),
  service: Math.floor(num('BENCH_SIZE_SERVICE', 1_000_000)),
  parts: (process.env.BENCH_SIZE_PARTS ?? 'engine,service').split(','),
  write: process.env.BENCH_WRITE !== '0',
  /** Job records in the record groups (lua/lib/records.lua), or in one HASH per shard with BENCH_RECORD_GROUPS=0. */
  recordGroups: process.env.BENCH_RECORD_GROUPS !== '0',
  redisUrl: process.env.REDIS_URL ?? DEFAULT_REDIS_URL,
};
const CHUNK = 1_000;
const WARM_UP = 20_000;
const HOUR = 3_600_000;
const log = makeLog('bench:size');

/** The engine at size: bytes per job with cfg.pending in one shard, enqueue and claim against 100 000, the stats read. */
async function engine(admin: Redis): Promise<{ figures: object; rows: string[] }> {
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
  /** The Redis server's CPU time so far (user + system), µs: what a job costs Redis, whatever the client's pace. */
  const redisCpu = async () => {
    const info = await admin.info('cpu');
    const field = (f: string) => Number(new RegExp(`^${f}:([\\d.]+)`, 'm').exec(info)?.[1] ?? Number.NaN);
    return (field('used_cpu_user') + field('used_cpu_sys')) * 1e6;
  };
  type Rate = { perSec: number; redisCpuUsPerJob: number };
  const enqueue = async (): Promise<Rate> => {
    const c0 = await redisCpu();
    const perSec = await add(cfg.base, 1, ahead);
    return { perSec, redisCpuUsPerJob: round(((await redisCpu()) - c0) / cfg.base, 1) };
  };
  /** Adds cfg.claim due jobs and times a worker (concurrency 50) through them. */
  const claim = async (): Promise<Rate> => {
    await add(cfg.claim, 4, () => Date.now() - 1_000);
    const c0 = await redisCpu();
    let completed = 0;
    let done!: () => void;
    const all = new Promise<void>((r) => (done = r));
    const w = await q.prepareWorker(50, { onCompleted: () => ++completed === cfg.claim && done() });
    const t0 = performance.now();
    await w.start();
    await all;
    const s = (performance.now() - t0) / 1_000;
    await w.stop();
    return { perSec: Math.round(cfg.claim / s), redisCpuUsPerJob: round(((await redisCpu()) - c0) / cfg.claim, 1) };
  };
  const stats = () => timed(20, () => q.counts());
  try {
    // Untimed first: the first enqueue and claim of a process pay for its warm-up (JIT, connections).
    await add(WARM_UP, 1, ahead);
    await claim();
    const small = { enqueue: await enqueue(), claim: await claim() };
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
    const large = { enqueue: await enqueue(), claim: await claim() };
    log(`with ${fmt(cfg.pending)} pending: ${JSON.stringify(large)}`);
    const statsPending = await stats();
    await add(cfg.overdue, 4, () => Date.now() - 5_000);
    const statsOverdue = await stats();
    const ratios = { enqueue: round(large.enqueue.perSec / small.enqueue.perSec, 2), claim: round(large.claim.perSec / small.claim.perSec, 2) };
    const within = (r: number) => (r >= 0.8 ? 'yes' : 'no');
    return {
      figures: { small, large, ratios, memory, statsPending, statsOverdue },
      rows: [
        `| Bytes per pending job with ${fmt(cfg.pending)} in one shard: used_memory delta / MEMORY USAGE of keys (${fmt(memory.keys)} keys) | ${memory.usedMemoryBytesPerJob} / ${memory.keyBytesPerJob} B | ≤ 160 B (goal 120) | ${memory.usedMemoryBytesPerJob <= 160 ? 'yes' : 'no'} |`,
        `| Enqueue, delayed jobs/s, ${fmt(cfg.base)} / ${fmt(cfg.pending)} pending | ${fmt(small.enqueue.perSec)} / ${fmt(large.enqueue.perSec)} (${ratios.enqueue}) | within 20 % | ${within(ratios.enqueue)} |`,
        `| Claim + ack of ${fmt(cfg.claim)} due jobs, c50, jobs/s, ${fmt(cfg.base)} / ${fmt(cfg.pending)} pending | ${fmt(small.claim.perSec)} / ${fmt(large.claim.perSec)} (${ratios.claim}) | within 20 % | ${within(ratios.claim)} |`,
        `| Redis CPU per job (server user + system), enqueue / claim + ack: ${fmt(cfg.base)} pending; ${fmt(cfg.pending)} pending | ${small.enqueue.redisCpuUsPerJob} / ${small.claim.redisCpuUsPerJob} µs; ${large.enqueue.redisCpuUsPerJob} / ${large.claim.redisCpuUsPerJob} µs | | |`,
        `| Queue stats (the scrape's read), p50 / max of 20: ${fmt(cfg.pending)} pending | ${statsPending.p50Ms} / ${statsPending.maxMs} ms | | |`,
        `| The same with ${fmt(cfg.overdue)} overdue beside them | ${statsOverdue.p50Ms} / ${statsOverdue.maxMs} ms | ≤ 10 ms | ${statsOverdue.maxMs <= 10 ? 'yes' : 'no'} |`,
      ],
    };
  } finally {
    await q.drop();
    await q.close();
  }
}

/** One kind of job the service keeps pending, as `job(at)` builds one due at `at`. */
type ServiceJob = { what: string; job: (at: number) => ScheduleInput };
const SERVICE_JOBS: ServiceJob[] = [
  {
    what: 'order expiry with the payload `{orderId}` (what the service writes with QUEUE_RECORD_GROUPS=0)',
    job: (at) => {
      const orderId = randomUUID();
      return { id: expireJobId(orderId), type: EXPIRE_JOB, at, payload: expirePayload(orderId, false), mode: 'nx' };
    },
  },
  {
    what: 'order expiry with the payload `{}` (what the service writes with QUEUE_RECORD_GROUPS=1)',
    job: (at) => {
      const orderId = randomUUID();
      return { id: expireJobId(orderId), type: EXPIRE_JOB, at, payload: expirePayload(orderId, true), mode: 'nx' };
    },
  },
  {
    what: 'appointment reminder with the payload `{appointmentId, startsAt}` (QUEUE_RECORD_GROUPS=0)',
    job: (at) => {
      const id = randomUUID();
      return { id: remindJobId(id), type: REMIND_JOB, at, payload: remindPayload({ id, startsAt: new Date(at + 86_400_000) }, false), mode: 'nx' };
    },
  },
  {
    what: 'appointment reminder with the payload `{startsAt}` (QUEUE_RECORD_GROUPS=1)',
    job: (at) => {
      const id = randomUUID();
      return { id: remindJobId(id), type: REMIND_JOB, at, payload: remindPayload({ id, startsAt: new Date(at + 86_400_000) }, true), mode: 'nx' };
    },
  },
];

/** Bytes per pending job of each kind the service keeps, cfg.service of it in one shard of a queue of its own. */
async function serviceJobs(admin: Redis): Promise<{ figures: object; rows: string[] }> {
  const figures: { what: string; usedMemoryBytesPerJob: number; keyBytesPerJob: number }[] = [];
  for (const kind of SERVICE_JOBS) {
    const prefix = `bench_size_${randomBytes(4).toString('hex')}`;
    const redis = new Redis(cfg.redisUrl, { maxRetriesPerRequest: null });
    const queue = createQueue(redis, { name: 'service', prefix, types: { [EXPIRE_JOB]: {}, [REMIND_JOB]: {} }, recordGroups: cfg.recordGroups });
    const match = `${prefix}:*`;
    try {
      // The kind before was UNLINKed: its memory is freed in the background, which used_memory would count here.
      while (Number(await infoField(admin, 'memory', 'lazyfree_pending_objects')) > 0) await sleep(50);
      const before = await usedMemory(admin);
      const keysBefore = await keysStorage(cfg.redisUrl, match);
      for (let from = 0; from < cfg.service; from += CHUNK) {
        const jobs = [];
        for (let i = from; i < Math.min(cfg.service, from + CHUNK); i++) jobs.push(kind.job(Date.now() + HOUR + (i % HOUR)));
        await queue.scheduleMany(jobs);
      }
      const after = await usedMemory(admin);
      const keysAfter = await keysStorage(cfg.redisUrl, match);
      const f = {
        what: kind.what,
        usedMemoryBytesPerJob: round((after - before) / cfg.service, 1),
        keyBytesPerJob: round((keysAfter.bytes - keysBefore.bytes) / cfg.service, 1),
      };
      log(`${fmt(cfg.service)} pending, ${kind.what}: ${JSON.stringify(f)}`);
      figures.push(f);
    } finally {
      await dropKeys(cfg.redisUrl, match);
      redis.disconnect();
    }
  }
  return {
    figures,
    rows: figures.map(
      (f) =>
        `| Bytes per pending ${f.what}, ${fmt(cfg.service)} in one shard: used_memory delta / MEMORY USAGE of keys | ${f.usedMemoryBytesPerJob} / ${f.keyBytesPerJob} B | | |`,
    ),
  };
}

async function main(): Promise<void> {
  const date = new Date().toISOString();
  const admin = new Redis(cfg.redisUrl);
  try {
    const engineRun = cfg.parts.includes('engine') ? await engine(admin) : null;
    const serviceRun = cfg.parts.includes('service') && cfg.service > 0 ? await serviceJobs(admin) : null;
    const result = {
      benchmark: 'size',
      date,
      settings: cfg,
      machine: machineInfo({ postgres: 'PostgreSQL not used', redis: await redisVersion(admin) }),
      ...(engineRun?.figures ?? {}),
      serviceJobs: serviceRun?.figures ?? null,
    };
    process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
    if (cfg.write) {
      const section = [
        `## ${date}`,
        '',
        ...machineLines(result.machine),
        `- Job records: ${cfg.recordGroups ? 'in record groups (BENCH_RECORD_GROUPS=1, QUEUE_RECORD_GROUPS=1)' : 'in one HASH per shard (BENCH_RECORD_GROUPS=0, QUEUE_RECORD_GROUPS=0)'}`,
        '',
        '| Figure | Value | Target | Met |',
        '|---|---|---|---|',
        ...(engineRun?.rows ?? []),
        ...(serviceRun?.rows ?? []),
        '',
      ].join('\n');
      const intro = ['How to run: `npm run bench:size` (Redis at `REDIS_URL`, about 2 GiB at the default size); knobs at the top of `bench/size.bench.ts`.'];
      log(`wrote ${writeMarkedSection(section, { heading: '# Engine at size', intro, marker: '<!-- size runs: newest first -->' })}`);
    }
  } finally {
    admin.disconnect();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`bench:size failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
