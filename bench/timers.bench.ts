// Timers benchmark: the timers API and their deliveries, with the service as
// production runs it (docs/operations.md): an API process (`src/main.ts
// api`) and a worker process (`src/main.ts worker`), default configuration,
// on a fresh database of the local PostgreSQL and a queue prefix of its own
// on the local Redis. Prints one JSON document on stdout, inserts a section
// into bench/HISTORY.md under "# Timers benchmark" and, after a full-size
// run, replaces its rows of BENCHMARKS.md's current figures.
//
// Scenarios:
// - creation: BENCH_TIMERS_CREATE timers through POST /timers/batch,
//   BENCH_TIMERS_BATCH a request, BENCH_TIMERS_IN_FLIGHT requests at once,
//   firing a day later (nothing fires): timers created a second, first
//   request sent to last answer received, and each request's latency.
// - delivery, one phase per target kind in turn (webhook, AMQP, NATS):
//   BENCH_TIMERS_RATE a second for BENCH_TIMERS_SECONDS, created beforehand
//   through the batch endpoint with their fire times spread evenly. Lateness
//   = arrival at the receiver or consumer - fireAt, on this machine's clock.
//   The webhook receiver, the AMQP consumer and the JetStream consumer run in
//   this process (bench/timers-receivers.ts): the service is two other
//   processes, so none of them shares the service's event loop, and a phase
//   leaves this process nothing else to do while its timers fire.
//
// Run: `npm run bench:timers` (`npm run --silent bench:timers > out.json`
// keeps npm's banner out of the JSON). Knobs (environment):
//   BENCH_TIMERS_WARMUP=5000       timers created before it, not measured (a cold API sheds its first batches)
//   BENCH_TIMERS_CREATE=100000     timers of the creation scenario (0: skip it)
//   BENCH_TIMERS_BATCH=1000        timers a request
//   BENCH_TIMERS_IN_FLIGHT=4       requests at once
//   BENCH_TIMERS_RATE=2000         firings a second in a delivery phase
//   BENCH_TIMERS_SECONDS=30        length of a delivery phase
//   BENCH_TIMERS_TARGETS=webhook,amqp,nats  the delivery phases, in order
//   BENCH_TIMERS_PROFILE=amqp      run that phase's worker under --cpu-prof (a fresh worker
//                                  for the phase) and summarise its self time; such a run
//                                  is not a row of BENCHMARKS.md
//   BENCH_CPU_PROF_DIR=dir         where the profile goes (default a directory under /tmp)
//   BENCH_AMQP_URL, BENCH_NATS_URL the brokers (default guest@127.0.0.1:5672, 127.0.0.1:4222)
//   BENCH_WRITE=0                  touch neither bench/HISTORY.md nor BENCHMARKS.md
//   BENCH_PG_URL, REDIS_URL        as in bench:http
import { randomBytes } from 'node:crypto';
import { mkdirSync, readdirSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../src/config.js';
import { percentiles } from './bench-util.js';
import { profileTop } from './cpu-profile-top.js';
import { type CurrentRow, benchCommit, layoutName, updateCurrentFigures } from './current-figures.js';
import {
  DEFAULT_PG_ADMIN_URL,
  DEFAULT_REDIS_URL,
  fmt,
  machineInfo,
  makeLog,
  num,
  openBenchRun,
  pgQuery,
  postgresVersion,
  redisVersion,
  round,
  type Service,
  sleep,
  withDatabase,
} from './http-harness.js';
import { cpuMark, cpuShare, pidOf, startWorker, type Worker } from './timers-processes.js';
import {
  type Receiver,
  type Target,
  type TargetKind,
  createArrivalLog,
  startAmqpConsumer,
  startNatsConsumer,
  startWebhookReceiver,
} from './timers-receivers.js';
import { type Phase, type Posted, TIMERS_TARGET, type TimersReport, timersCurrentRows, writeTimersSection } from './timers-report.js';

const KINDS = ['webhook', 'amqp', 'nats'] as const satisfies readonly TargetKind[];
const DAY_MS = 86_400_000;
/** Creation rate assumed for a phase's lead when the creation scenario did not run. */
const ASSUMED_CREATE_PER_SEC = 5_000;
/** Retries of a batch the API shed (503) or limited (429) before it counts as failed. */
const BATCH_RETRIES = 5;

const kindsOf = (raw: string | undefined) => {
  const ks = (raw ?? KINDS.join(',')).split(',').map((x) => x.trim()) as TargetKind[];
  const bad = ks.filter((k) => !KINDS.includes(k));
  if (bad.length) throw new Error(`BENCH_TIMERS_TARGETS: unknown target kinds ${bad.join(', ')} (known: ${KINDS.join(', ')})`);
  return ks;
};

const cfg = {
  warmup: Math.floor(num('BENCH_TIMERS_WARMUP', 5_000)),
  create: Math.floor(num('BENCH_TIMERS_CREATE', 100_000)),
  batch: Math.max(1, Math.floor(num('BENCH_TIMERS_BATCH', 1_000))),
  inFlight: Math.max(1, Math.floor(num('BENCH_TIMERS_IN_FLIGHT', 4))),
  rate: Math.max(1, num('BENCH_TIMERS_RATE', 2_000)),
  seconds: Math.max(1, num('BENCH_TIMERS_SECONDS', 30)),
  targets: kindsOf(process.env.BENCH_TIMERS_TARGETS),
  profile: process.env.BENCH_TIMERS_PROFILE ? kindsOf(process.env.BENCH_TIMERS_PROFILE)[0] : undefined,
  write: process.env.BENCH_WRITE !== '0',
  pgAdminUrl: process.env.BENCH_PG_URL ?? DEFAULT_PG_ADMIN_URL,
  redisUrl: process.env.REDIS_URL ?? DEFAULT_REDIS_URL,
  amqpUrl: process.env.BENCH_AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672',
  natsUrl: process.env.BENCH_NATS_URL ?? 'nats://127.0.0.1:4222',
};
const runTag = randomBytes(4).toString('hex');
const dbName = `ots_bench_timers_${runTag}`;
const queuePrefix = `bench_timers_${runTag}`;
const dbUrl = withDatabase(cfg.pgAdminUrl, dbName);
const profDir = process.env.BENCH_CPU_PROF_DIR ?? join(os.tmpdir(), `ots-timers-prof-${runTag}`);
const log = makeLog('bench:timers');
/** The service's record layout, which this bench does not set: the default of src/config.ts. */
const SERVICE_LAYOUT = layoutName(loadConfig({}).QUEUE_RECORD_GROUPS === '1');
/** The sizes: only such a run, unprofiled, stands for the current figures. */
const fullSize = () => cfg.create >= 100_000 && cfg.rate >= 2_000 && cfg.seconds >= 30 && KINDS.every((k) => cfg.targets.includes(k)) && !cfg.profile;

// ---------------------------------------------------------------- POST /timers/batch
type Item = { key: string; fireAt: string; target: Target; payload: unknown };

/** Sends `items` through POST /timers/batch, `cfg.batch` a request, `cfg.inFlight` at once; bodies are made before the clock starts. */
async function postTimers(service: Service, items: readonly Item[]): Promise<Posted> {
  const bodies: string[] = [];
  for (let i = 0; i < items.length; i += cfg.batch) bodies.push(JSON.stringify({ timers: items.slice(i, i + cfg.batch) }));
  const url = `${service.baseUrl}/timers/batch`;
  const latencies: number[] = [];
  const statuses: Record<string, number> = {};
  let next = 0;
  let retried = 0;
  let failed = 0;
  const one = async (body: string) => {
    for (let attempt = 0; ; attempt++) {
      const t = performance.now();
      const res = await fetch(url, { method: 'POST', headers: service.headers, body });
      const text = await res.text();
      if (res.status === 200) latencies.push(performance.now() - t);
      if ((res.status === 503 || res.status === 429) && attempt < BATCH_RETRIES) {
        retried++;
        log(`  POST /timers/batch answered ${res.status} (${text.slice(0, 200)}): sent again`);
        await sleep(Number(res.headers.get('retry-after') ?? 0) * 1_000 || 100);
        continue;
      }
      if (res.status !== 200) {
        failed++;
        statuses[`request ${res.status}`] = (statuses[`request ${res.status}`] ?? 0) + 1;
        log(`  POST /timers/batch answered ${res.status}: ${text.slice(0, 300)}`);
        return;
      }
      for (const r of (JSON.parse(text) as { results: { status: number }[] }).results) statuses[r.status] = (statuses[r.status] ?? 0) + 1;
      return;
    }
  };
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: Math.min(cfg.inFlight, bodies.length) }, async () => {
      while (next < bodies.length) await one(bodies[next++] as string);
    }),
  );
  const seconds = (performance.now() - t0) / 1_000;
  const created = statuses['201'] ?? 0;
  return {
    timers: items.length,
    requests: bodies.length,
    seconds: round(seconds, 2),
    perSec: round(created / seconds, 0),
    requestMs: percentiles(latencies),
    statuses,
    retried,
    failed,
  };
}

// ---------------------------------------------------------------- the run's database
let autovacuum = 'unknown';

/** What autovacuum would do after a burst of inserts, when this machine's PostgreSQL runs without it. */
async function vacuumIfOff(): Promise<void> {
  if (autovacuum !== 'off') return;
  const t = performance.now();
  await pgQuery(dbUrl, 'VACUUM ANALYZE');
  log(`  VACUUM ANALYZE in ${Math.round(performance.now() - t)} ms (autovacuum is off here)`);
}

/** Transactions committed in the run's database so far (each statement outside a transaction is one). */
const commits = async () =>
  Number((await pgQuery<{ n: string }>(dbUrl, 'SELECT xact_commit::text AS n FROM pg_stat_database WHERE datname = current_database()'))[0]?.n ?? 0);

// ---------------------------------------------------------------- delivery phases
type Deps = {
  service: Service;
  worker: () => Worker;
  restartWorker: (nodeArgs: string[]) => Promise<Worker>;
  receivers: Record<TargetKind, Receiver>;
  arrivals: ReturnType<typeof createArrivalLog>;
  redis: Parameters<typeof cpuMark>[2];
};

async function deliveryPhase(kind: TargetKind, createPerSec: number, d: Deps): Promise<Phase> {
  const n = Math.round(cfg.rate * cfg.seconds);
  const profiled = cfg.profile === kind;
  if (profiled) {
    mkdirSync(profDir, { recursive: true });
    await d.restartWorker(['--cpu-prof', `--cpu-prof-dir=${profDir}`]);
    log(`  worker restarted under --cpu-prof (${profDir})`);
  }
  const prefix = `${kind}-`;
  const arrivals = d.arrivals.phase(prefix);
  // Room for the creation at a third of the rate measured, its VACUUM and a margin.
  const startMs = Math.ceil(Date.now() + (n / createPerSec) * 3_000 + 5_000);
  const endMs = startMs + cfg.seconds * 1_000;
  const target = d.receivers[kind].target;
  const items = Array.from({ length: n }, (_, i) => ({
    key: `${prefix}${i}`,
    fireAt: new Date(startMs + Math.floor((i * 1_000) / cfg.rate)).toISOString(),
    target,
    payload: { n: i },
  }));
  log(`${kind}: ${fmt(n)} timers firing at ${fmt(cfg.rate)}/s for ${cfg.seconds} s from ${new Date(startMs).toISOString()}`);
  const created = await postTimers(d.service, items);
  log(`  created ${fmt(created.statuses['201'] ?? 0)} in ${created.seconds} s (${fmt(created.perSec)}/s)`);
  await vacuumIfOff();
  const leadLeftMs = startMs - Date.now();
  if (leadLeftMs < 1_000) log(`  creation overran its lead: ${leadLeftMs} ms left before the first fire time`);
  await sleep(Math.max(0, startMs - Date.now()));
  const pids = () => ({
    worker: d.worker().child.pid,
    api: d.service.child.pid,
    broker: kind === 'amqp' ? pidOf('beam.smp') : kind === 'nats' ? pidOf('nats-server') : null,
  });
  const cpu0 = await cpuMark(pids(), dbUrl, d.redis);
  const commits0 = await commits();
  const hr0 = process.hrtime.bigint();
  await sleep(Math.max(0, endMs - Date.now()));
  const cpu1 = await cpuMark(pids(), dbUrl, d.redis);
  const commits1 = await commits();
  const hr1 = process.hrtime.bigint();
  // The last fire times' deliveries, and any repeat, come a little after.
  const deadline = Date.now() + 60_000;
  while (arrivals.unique() < n && Date.now() < deadline) await sleep(100);
  await sleep(1_000);
  const latenessMs = arrivals.lateness();
  const targetP99Ms = TIMERS_TARGET.p99Ms[kind];
  const judged = cfg.rate >= 2_000 && cfg.seconds >= 30 && !profiled;
  const phase: Phase = {
    kind,
    asked: n,
    created,
    leadLeftMs,
    delivered: arrivals.unique(),
    duplicates: arrivals.duplicates(),
    missing: n - arrivals.unique(),
    latenessMs,
    laterThan100Ms: arrivals.laterThan(100),
    bySecond: arrivals.bySecond(startMs),
    cpuPct: cpuShare(cpu0, cpu1),
    pgCommitsPerTimer: round((commits1 - commits0) / n, 2),
    targetP99Ms,
    met: judged ? latenessMs !== null && latenessMs.p99 <= targetP99Ms && arrivals.unique() === n : null,
  };
  log(`  delivered ${fmt(phase.delivered)}/${fmt(n)}, ${phase.duplicates} duplicates; lateness ${JSON.stringify(latenessMs)}`);
  log(`  CPU % of a core: ${JSON.stringify(phase.cpuPct)}`);
  if (profiled) {
    const pid = d.worker().child.pid;
    await d.restartWorker([]);
    // CPU.<date>.<time>.<pid>.<thread>.<n>.cpuprofile: thread 0 is the main one (others are loader threads).
    const file = readdirSync(profDir)
      .filter((f) => f.endsWith('.cpuprofile') && f.split('.')[3] === String(pid) && f.split('.')[4] === '0')
      .map((f) => join(profDir, f))
      .pop();
    if (file) {
      phase.profile = { file, ...profileTop(file, 15, { fromUs: Number(hr0 / 1_000n), toUs: Number(hr1 / 1_000n) }) };
      log(`  profile ${file}: ${JSON.stringify({ ...phase.profile, functions: phase.profile.functions.slice(0, 8) })}`);
    } else log(`  no .cpuprofile in ${profDir}`);
  }
  return phase;
}

// ---------------------------------------------------------------- main
async function main(): Promise<void> {
  const date = new Date().toISOString();
  const loadAtStart = os.loadavg().map((x) => round(x, 2));
  log(`run ${runTag}: database ${dbName}, queue prefix ${queuePrefix}`);
  const run = openBenchRun({
    connectionName: 'bench-timers',
    dbName,
    pgAdminUrl: cfg.pgAdminUrl,
    redisUrl: cfg.redisUrl,
    keyPatterns: [`${queuePrefix}:*`],
    log,
  });
  const arrivals = createArrivalLog();
  const receivers: Partial<Record<TargetKind, Receiver>> = {};
  let worker: Worker | undefined;
  const closeOwn = async () => {
    await worker?.stop();
    worker = undefined;
    for (const r of Object.values(receivers)) await r.close();
  };
  // openBenchRun tears its own part down on a signal; the worker and the brokers' queue and stream are ours.
  const onSignal = () => void closeOwn();
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  try {
    await run.redis.connect();
    const versions = { redis: await redisVersion(run.redis), postgres: await postgresVersion(cfg.pgAdminUrl) };
    autovacuum = (await pgQuery<{ autovacuum: string }>(cfg.pgAdminUrl, 'SHOW autovacuum'))[0]?.autovacuum ?? 'unknown';
    await run.createDatabase();

    const webhook = (receivers.webhook = await startWebhookReceiver(arrivals));
    receivers.amqp = await startAmqpConsumer(cfg.amqpUrl, `bench-timers-${runTag}`, arrivals);
    receivers.nats = await startNatsConsumer(cfg.natsUrl, `BENCH_TIMERS_${runTag}`, `bench-timers.${runTag}`, arrivals);
    const env = {
      QUEUE_PREFIX: queuePrefix,
      TIMER_WEBHOOK_HOSTS: webhook.host,
      TIMER_AMQP_EXCHANGES: `bench-timers-${runTag}`,
      TIMER_NATS_SUBJECTS: `bench-timers.${runTag}.>`,
      AMQP_URL: cfg.amqpUrl,
      NATS_URL: cfg.natsUrl,
    };
    const t0 = performance.now();
    const service = await run.startService(env, [], 'api');
    const workerEnv = { ...env, DATABASE_URL: dbUrl, REDIS_URL: cfg.redisUrl };
    worker = await startWorker(workerEnv, [], log);
    log(`API on ${service.baseUrl} and worker up after ${Math.round(performance.now() - t0)} ms`);
    const restartWorker = async (nodeArgs: string[]) => {
      await worker?.stop();
      worker = await startWorker(workerEnv, nodeArgs, log);
      return worker;
    };

    const farTimers = (prefix: string, n: number) => {
      const far = Date.now() + DAY_MS;
      return Array.from({ length: n }, (_, i) => ({
        key: `${prefix}${i}`,
        fireAt: new Date(far + i).toISOString(),
        target: webhook.target,
        payload: { n: i },
      }));
    };
    if (cfg.warmup > 0) {
      const w = await postTimers(service, farTimers('warmup-', cfg.warmup));
      log(`warm-up: ${fmt(cfg.warmup)} timers in ${w.seconds} s, ${w.retried} requests sent again`);
    }
    let creation: Posted | null = null;
    if (cfg.create > 0) {
      log(`creation: ${fmt(cfg.create)} timers, ${fmt(cfg.batch)} a request, ${cfg.inFlight} in flight, firing in a day`);
      creation = await postTimers(service, farTimers('create-', cfg.create));
      log(`  ${JSON.stringify(creation)}`);
      await vacuumIfOff();
    }

    const deps: Deps = {
      service,
      worker: () => worker as Worker,
      restartWorker,
      receivers: receivers as Record<TargetKind, Receiver>,
      arrivals,
      redis: run.redis,
    };
    const phases: Phase[] = [];
    for (const kind of cfg.targets) phases.push(await deliveryPhase(kind, creation?.perSec || ASSUMED_CREATE_PER_SEC, deps));
    if (arrivals.strays()) log(`${arrivals.strays()} messages of no phase under way arrived`);

    const report: TimersReport = {
      benchmark: 'timers',
      date,
      runTag,
      commit: benchCommit(),
      settings: {
        ...cfg,
        fullSize: fullSize(),
        autovacuum,
        recordLayout: SERVICE_LAYOUT,
        service: 'src/main.ts api + src/main.ts worker, default configuration',
      },
      machine: machineInfo(versions),
      loadAverage: { start: loadAtStart, end: os.loadavg().map((x) => round(x, 2)) },
      target: TIMERS_TARGET,
      creation: creation && { ...creation, met: cfg.create >= 100_000 ? creation.perSec >= TIMERS_TARGET.createPerSec : null },
      phases,
      strays: arrivals.strays(),
    };
    process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
    if (!cfg.write) log('BENCH_WRITE=0: bench/HISTORY.md and BENCHMARKS.md left alone');
    else if (cfg.profile) log('a profiled run: bench/HISTORY.md and BENCHMARKS.md left alone');
    else {
      log(`wrote ${writeTimersSection(report)}`);
      if (fullSize()) log(`wrote ${updateCurrentFigures(timersCurrentRows(report, SERVICE_LAYOUT) satisfies CurrentRow[])}`);
    }
  } finally {
    await closeOwn();
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    await run.cleanup();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`bench:timers failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
