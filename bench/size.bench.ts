// The engine at size: one shard of our delay queue holding BENCH_SIZE_PENDING
// pending jobs (default 10 000 000). Measured, through the same BenchQueue as
// `npm run bench`:
// - bytes per pending job (INFO used_memory delta over the load, and the sum
//   of MEMORY USAGE over the queue's keys);
// - delayed enqueue (chunks of 1 000, one in flight) and claim + ack of jobs
//   already due (concurrency 50, a no-op handler) with BENCH_SIZE_BASE jobs
//   pending (default 100 000) and with the shard full, in BENCH_SIZE_ROUNDS
//   rounds (default 5) that alternate the two queues, phase by phase, on the
//   same server: the small one fresh each round in a database of its own
//   (BENCH_SIZE_SMALL_DB, default 1: its own keyspace, as a server holding
//   only it would have). Medians of the rounds. Measured one after the other,
//   minutes apart, the two sizes differed by this VM's drift: the same
//   100 000 phase took 8.4 to 16.3 µs of Redis CPU a job in one hour;
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
// default size; only its own keys, in the database of REDIS_URL and in
// BENCH_SIZE_SMALL_DB, deleted afterwards). Knobs:
// BENCH_SIZE_PENDING, BENCH_SIZE_BASE, BENCH_SIZE_OVERDUE, BENCH_SIZE_CLAIM=50000, BENCH_SIZE_ROUNDS=5, BENCH_SIZE_SMALL_DB=1,
// BENCH_SIZE_SERVICE=1000000, BENCH_SIZE_PARTS=engine,service (either), BENCH_RECORD_GROUPS=0|1 (job
// records in one HASH per shard or in record groups; unset: the service's default), BENCH_WRITE=0. Prints JSON
// on stdout; writes a section into bench/HISTORY.md and its rows of BENCHMARKS.md's current figures.
import { randomBytes, randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { REMIND_JOB, remindJobId, remindPayload } from '../src/modules/appointments/appointments.service.js';
import { EXPIRE_JOB, expireJobId, expirePayload } from '../src/modules/orders/orders.service.js';
import { createQueue } from '../src/queue/producer/queue.js';
import type { ScheduleInput } from '../src/queue/index.js';
import { benchRecordGroups } from './bench-config.js';
import { type CurrentRow, benchCommit, layoutName, updateCurrentFigures } from './current-figures.js';
import { openOurs } from './ours-engine.js';
import { dropKeys, infoField, keysStorage, redisCpuSeconds, round, timed, usedMemory } from './bench-util.js';
import { DEFAULT_REDIS_URL, fmt, machineInfo, machineLines, makeLog, num, redisVersion, sleep, writeMarkedSection } from './http-harness.js';

const cfg = {
  pending: Math.floor(num('BENCH_SIZE_PENDING', 10_000_000)),
  base: Math.floor(num('BENCH_SIZE_BASE', 100_000)),
  overdue: Math.floor(num('BENCH_SIZE_OVERDUE', 1_000_000)),
  claim: Math.floor(num('BENCH_SIZE_CLAIM', 50_000)),
  service: Math.floor(num('BENCH_SIZE_SERVICE', 1_000_000)),
  rounds: Math.max(1, Math.floor(num('BENCH_SIZE_ROUNDS', 5))),
  smallDb: Math.floor(num('BENCH_SIZE_SMALL_DB', 1)),
  parts: (process.env.BENCH_SIZE_PARTS ?? 'engine,service').split(','),
  write: process.env.BENCH_WRITE !== '0',
  /** Job records in the record groups (lua/lib/records.lua) or in one HASH per shard: BENCH_RECORD_GROUPS, else the service's default. */
  recordGroups: benchRecordGroups(),
  redisUrl: process.env.REDIS_URL ?? DEFAULT_REDIS_URL,
};
const CHUNK = 1_000;
const WARM_UP = 20_000;
const HOUR = 3_600_000;
const log = makeLog('bench:size');

/**
 * used_memory once nothing UNLINKed is still being freed in the background
 * (an earlier run's queue, the kind before): counted in `before`, it made a
 * load of 10 000 000 look like 45 B a job where its keys hold 121.
 */
async function usedMemoryAtRest(admin: Redis): Promise<number> {
  while (Number(await infoField(admin, 'memory', 'lazyfree_pending_objects')) > 0) await sleep(50);
  return usedMemory(admin);
}

// Due one to two hours ahead: never due while the benchmark runs.
const ahead = (i: number) => Date.now() + HOUR + (i % HOUR);
type Rate = { perSec: number; redisCpuUsPerJob: number };

/** A queue of the bench on `url` and its phases; Redis CPU is the server's (user + system), what a job costs Redis whatever the client's pace. */
function sizeQueue(url: string, admin: Redis) {
  const q = openOurs(url, { engine: 'ours', name: 'size', prefix: `bench_size_${randomBytes(4).toString('hex')}` });
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
  const redisCpu = async () => (await redisCpuSeconds(admin)) * 1e6;
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
  /** Untimed: the first enqueue and claim of a queue pay for its warm-up (JIT, connections). */
  const warmUp = async () => {
    await add(WARM_UP, 1, ahead);
    await claim();
  };
  return { q, add, enqueue, claim, warmUp };
}
type SizeQueue = ReturnType<typeof sizeQueue>;
type Round = { small: { enqueue: Rate; claim: Rate }; large: { enqueue: Rate; claim: Rate } };

/**
 * One round: a fresh queue with cfg.base pending in its own database beside
 * the full one, their enqueue phases, then their claim phases, the two
 * queues taking turns to go first.
 */
async function pairedRound(large: SizeQueue, admin: Redis, first: 'small' | 'large'): Promise<Round> {
  const url = new URL(cfg.redisUrl);
  url.pathname = `/${cfg.smallDb}`;
  const small = sizeQueue(url.toString(), admin);
  await small.q.init();
  try {
    await small.warmUp();
    const order = first === 'small' ? [small, large] : [large, small];
    const enqueue = new Map<SizeQueue, Rate>();
    for (const x of order) enqueue.set(x, await x.enqueue());
    const claim = new Map<SizeQueue, Rate>();
    for (const x of order) claim.set(x, await x.claim());
    const of = (x: SizeQueue) => ({ enqueue: enqueue.get(x) as Rate, claim: claim.get(x) as Rate });
    return { small: of(small), large: of(large) };
  } finally {
    await small.q.drop();
    await small.q.close();
  }
}

const median = (xs: readonly number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
};

/** Medians of the rounds, the ratio of the medians (large / small jobs a second) and the range of the rounds' own ratios. */
function summariseRounds(rounds: readonly Round[], phase: 'enqueue' | 'claim') {
  const small = median(rounds.map((r) => r.small[phase].perSec));
  const large = median(rounds.map((r) => r.large[phase].perSec));
  const each = rounds.map((r) => r.large[phase].perSec / r.small[phase].perSec);
  return {
    small: { perSec: Math.round(small), redisCpuUsPerJob: round(median(rounds.map((r) => r.small[phase].redisCpuUsPerJob)), 1) },
    large: { perSec: Math.round(large), redisCpuUsPerJob: round(median(rounds.map((r) => r.large[phase].redisCpuUsPerJob)), 1) },
    ratio: round(large / small, 2),
    roundRatios: { min: round(Math.min(...each), 2), max: round(Math.max(...each), 2) },
  };
}

/** The engine at size: bytes per job with cfg.pending in one shard, enqueue and claim against cfg.base (paired rounds), the stats read. */
async function engine(admin: Redis): Promise<{ figures: object; rows: string[]; current: Omit<CurrentRow, 'measured' | 'commit'>[] }> {
  if (new URL(cfg.redisUrl).pathname === `/${cfg.smallDb}`) throw new Error('BENCH_SIZE_SMALL_DB must differ from the database of REDIS_URL');
  const large = sizeQueue(cfg.redisUrl, admin);
  const { q } = large;
  await q.init();
  const stats = () => timed(20, () => q.counts());
  try {
    await large.warmUp();
    const before = await usedMemoryAtRest(admin);
    const keysBefore = await q.storage();
    const t0 = performance.now();
    const load = cfg.pending - WARM_UP;
    const loadPerSec = await large.add(load, 4, ahead);
    const after = await usedMemory(admin);
    const keysAfter = await q.storage();
    const memory = {
      usedMemoryBytesPerJob: round((after - before) / load, 1),
      keyBytesPerJob: round((keysAfter.bytes - keysBefore.bytes) / load, 1),
      keys: keysAfter.objects,
    };
    log(`loaded ${fmt(load)} in ${round((performance.now() - t0) / 1_000, 1)} s (${fmt(loadPerSec)}/s): ${JSON.stringify(memory)}`);
    const rounds: Round[] = [];
    for (let r = 0; r < cfg.rounds; r++) {
      rounds.push(await pairedRound(large, admin, r % 2 === 0 ? 'small' : 'large'));
      log(`round ${r + 1} of ${cfg.rounds}: ${JSON.stringify(rounds[r])}`);
    }
    const enqueue = summariseRounds(rounds, 'enqueue');
    const claim = summariseRounds(rounds, 'claim');
    const statsPending = await stats();
    await large.add(cfg.overdue, 4, () => Date.now() - 5_000);
    const statsOverdue = await stats();
    const within = (r: number) => (r >= 0.8 ? 'yes' : 'no');
    const sizes = `${fmt(cfg.base)} / ${fmt(cfg.pending)} pending, medians of ${cfg.rounds} paired rounds`;
    const rateRow = (what: string, x: typeof enqueue) =>
      `| ${what}, ${sizes} | ${fmt(x.small.perSec)} / ${fmt(x.large.perSec)} (${x.ratio}; rounds ${x.roundRatios.min}-${x.roundRatios.max}) | within 20 % | ${within(x.ratio)} |`;
    return {
      figures: { rounds, enqueue, claim, memory, statsPending, statsOverdue },
      current: [
        { figure: `Bytes per pending job, ${fmt(cfg.pending)} in one shard (used_memory delta)`, ours: `${memory.usedMemoryBytesPerJob}` },
        { figure: `Enqueue at ${fmt(cfg.pending)} pending over at ${fmt(cfg.base)} (median ratio)`, ours: `${enqueue.ratio}` },
        { figure: `Claim + ack at ${fmt(cfg.pending)} pending over at ${fmt(cfg.base)} (median ratio)`, ours: `${claim.ratio}` },
        { figure: `Queue stats with ${fmt(cfg.overdue)} overdue, max (ms)`, ours: `${statsOverdue.maxMs}` },
      ].map((r) => ({ ...r, layout: layoutName(cfg.recordGroups), command: '`npm run bench:size`' })),
      rows: [
        `| Bytes per pending job with ${fmt(cfg.pending)} in one shard: used_memory delta / MEMORY USAGE of keys (${fmt(memory.keys)} keys) | ${memory.usedMemoryBytesPerJob} / ${memory.keyBytesPerJob} B | ≤ 160 B (goal 120) | ${memory.usedMemoryBytesPerJob <= 160 ? 'yes' : 'no'} |`,
        rateRow('Enqueue, delayed jobs/s', enqueue),
        rateRow(`Claim + ack of ${fmt(cfg.claim)} due jobs, c50, jobs/s`, claim),
        `| Redis CPU per job (server user + system), enqueue / claim + ack, medians: ${fmt(cfg.base)} pending; ${fmt(cfg.pending)} pending | ${enqueue.small.redisCpuUsPerJob} / ${claim.small.redisCpuUsPerJob} µs; ${enqueue.large.redisCpuUsPerJob} / ${claim.large.redisCpuUsPerJob} µs | | |`,
        `| Queue stats (the scrape's read), p50 / max of 20: ${fmt(cfg.pending + cfg.rounds * cfg.base)} pending | ${statsPending.p50Ms} / ${statsPending.maxMs} ms | | |`,
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
    what: 'order expiry (payload `{}`: the job id names the order)',
    job: (at) => ({ id: expireJobId(randomUUID()), type: EXPIRE_JOB, at, payload: expirePayload(), mode: 'nx' }),
  },
  {
    what: 'appointment reminder (payload `{startsAt}`: the job id names the appointment)',
    job: (at) => ({ id: remindJobId(randomUUID()), type: REMIND_JOB, at, payload: remindPayload({ startsAt: new Date(at + 86_400_000) }), mode: 'nx' }),
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
      const before = await usedMemoryAtRest(admin);
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
      const m = result.machine;
      const measured = `${date.slice(0, 10)}, ${m.cpu.replace(/\(R\)/g, '').replace(/ Processor$/, '')}, ${m.cores} cores`;
      const current = (engineRun?.current ?? []).map((r) => ({ ...r, measured, commit: benchCommit() }));
      // Only the default size stands for the current figures (a smaller run names other figures).
      if (current.length && cfg.pending >= 10_000_000) log(`wrote ${updateCurrentFigures(current)}`);
    }
  } finally {
    admin.disconnect();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`bench:size failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
