// HTTP benchmark of the orders API: POST /orders and POST /orders/:id/pay
// driven by autocannon against the real service, started as a separate process
// (`node --import tsx src/main.ts all`) on a fresh PostgreSQL database and its
// own Redis key prefix. Prints one JSON document on stdout (progress goes to
// stderr) and inserts a section into bench/HISTORY.md under "# HTTP API benchmark" and
// replaces its rows of BENCHMARKS.md's current figures.
//
// Run: `npm run bench:http`. Needs PostgreSQL (trust auth) and Redis locally.
// Knobs (environment):
//   BENCH_DURATION_S=10        seconds per measured scenario
//   BENCH_WARMUP_S=2           seconds of POST /orders before measuring
//   BENCH_WRITE=0              do not touch bench/HISTORY.md nor BENCHMARKS.md
//   BENCH_CONNECTIONS=10,50    connections of the POST /orders scenarios
//   BENCH_PAY_CONNECTIONS=10,50  connections of the pay scenarios
//   BENCH_PAY_ORDERS=20000     unpaid orders made ready for the pay scenarios (split among them)
//   BENCH_IDEMPOTENCY_KEY=1    send a unique Idempotency-Key with every POST /orders
//   BENCH_DB_POOL=10           DATABASE_POOL_SIZE of the service
//   BENCH_PG_URL               admin URL (default postgresql://postgres@127.0.0.1:5432/postgres)
//   REDIS_URL                  default redis://127.0.0.1:6379
//   BENCH_CPU_PROF_DIR=dir     run the service under `node --cpu-prof` and write its profile there
//   BENCH_SERVICE_LOG_LEVEL    LOG_LEVEL of the service (default warn); its logs go to stderr
// `npm run --silent bench:http > out.json` keeps npm's banner out of the JSON.
// Teardown always runs: SIGTERM to the service, DROP DATABASE ... WITH (FORCE),
// SCAN + DEL of the run's own Redis keys (never FLUSHDB/FLUSHALL).
// The parts shared with parcels.bench.ts (database, service process, autocannon
// summary, machine facts, bench/HISTORY.md writer, key cleanup) are in http-harness.ts.
import { randomBytes } from 'node:crypto';
import { pathToFileURL } from 'node:url';
import { loadConfig } from '../src/config.js';
import { type CurrentRow, benchCommit, layoutName, updateCurrentFigures } from './current-figures.js';
import {
  type AcOptions,
  type AcResult,
  autocannon,
  DEFAULT_PG_ADMIN_URL,
  DEFAULT_REDIS_URL,
  fmt,
  type Machine,
  machineInfo,
  machineLines,
  makeLog,
  num,
  nums,
  openBenchRun,
  pgQuery,
  postgresVersion,
  redisVersion,
  REPORT_FILE,
  type Scenario,
  type Service,
  sleep,
  summarise,
  withDatabase,
  writeMarkedSection,
} from './http-harness.js';

export type { Machine, Scenario } from './http-harness.js';

// ---------------------------------------------------------------- settings
const HTTP_HEADING = '# HTTP API benchmark';
const HTTP_MARKER = '<!-- http runs: newest first -->';
/** Issue 15: POST /orders at 50 connections (the runs before 2026-11-26 judged 1 500 a second at every connection count). */
const TARGET = { connections: 50, requestsPerSec: 3_000, p99Ms: 50 } as const;

const cfg = {
  durationS: num('BENCH_DURATION_S', 10),
  warmupS: num('BENCH_WARMUP_S', 2),
  write: process.env.BENCH_WRITE !== '0',
  createConnections: nums('BENCH_CONNECTIONS', [10, 50]),
  payConnections: nums('BENCH_PAY_CONNECTIONS', [10, 50]),
  payOrders: Math.floor(num('BENCH_PAY_ORDERS', 20_000)),
  idempotencyKey: process.env.BENCH_IDEMPOTENCY_KEY === '1',
  dbPool: Math.max(1, Math.floor(num('BENCH_DB_POOL', 10))),
  pgAdminUrl: process.env.BENCH_PG_URL ?? DEFAULT_PG_ADMIN_URL,
  redisUrl: process.env.REDIS_URL ?? DEFAULT_REDIS_URL,
  cpuProfDir: process.env.BENCH_CPU_PROF_DIR,
};
const runTag = randomBytes(4).toString('hex');
const dbName = `ots_bench_${runTag}`;
const queuePrefix = `bench_http_${runTag}`;
const dbUrl = withDatabase(cfg.pgAdminUrl, dbName);

const ORDER_BODY = JSON.stringify({
  customerId: 'cust-000042',
  currency: 'EUR',
  items: [
    { sku: 'SKU-TSHIRT-M-BLUE', quantity: 2, unitPriceCents: 1_999 },
    { sku: 'SKU-MUG-350ML', quantity: 1, unitPriceCents: 1_250 },
  ],
});

const log = makeLog('bench:http');

// ---------------------------------------------------------------- scenarios
function createOptions(service: Service, connections: number): AcOptions {
  return {
    url: `${service.baseUrl}/orders`,
    connections,
    method: 'POST',
    headers: cfg.idempotencyKey ? { ...service.headers, 'idempotency-key': 'bench-[<id>]' } : service.headers,
    idReplacement: cfg.idempotencyKey,
    body: ORDER_BODY,
  };
}

async function runCreate(service: Service, connections: number, durationS: number): Promise<AcResult> {
  return autocannon({ ...createOptions(service, connections), duration: durationS });
}

/** Pays the given UNPAID orders, each id once: autocannon stops after ids.length requests or the duration. */
async function runPay(service: Service, connections: number, durationS: number, ids: readonly string[]): Promise<{ result: AcResult; used: number }> {
  // autocannon treats a per-connection limit of 0 as "no limit": every connection needs an id.
  if (ids.length < connections) throw new Error(`only ${ids.length} order ids for ${connections} connections (raise BENCH_PAY_ORDERS)`);
  let next = 0;
  let reused = 0;
  const result = await autocannon({
    url: service.baseUrl,
    connections,
    duration: durationS,
    // Every request takes a fresh id from the list (autocannon calls setupRequest once per request sent).
    maxOverallRequests: ids.length,
    requests: [
      {
        method: 'POST',
        headers: service.headers,
        setupRequest: (req) => {
          if (next >= ids.length) reused++;
          const id = ids[Math.min(next, ids.length - 1)] as string;
          next++;
          return { ...req, path: `/orders/${id}/pay`, body: JSON.stringify({ paymentRef: `bench-pay-${next}` }) };
        },
      },
    ],
  });
  if (reused) throw new Error(`the pay scenario ran out of order ids (${reused} requests reused the last id)`);
  return { result, used: next };
}

async function unpaidIds(limit: number): Promise<string[]> {
  const rows = await pgQuery<{ id: string }>(dbUrl, `SELECT id::text AS id FROM orders WHERE status = 'UNPAID' ORDER BY created_at, id LIMIT $1`, [limit]);
  return rows.map((r) => r.id);
}

// ---------------------------------------------------------------- report
function targetMet(s: Scenario): boolean {
  return s.requestsPerSecMean >= TARGET.requestsPerSec && s.latencyMs.p99 <= TARGET.p99Ms && s.non2xx === 0 && s.errors === 0;
}

export function markdownSection(date: string, machine: Machine, scenarios: Scenario[], notes: string[]): string {
  const short = cfg.durationS < 10;
  const lines = [
    `## HTTP API (orders) — ${date}${short ? ` — ${cfg.durationS} s per scenario (short run, not judged against the target)` : ''}`,
    '',
    ...machineLines(machine),
    `- Service: \`node --import tsx src/main.ts all\` (API + workers in one process), DATABASE_POOL_SIZE=${cfg.dbPool}, LOG_LEVEL=warn; autocannon on the same machine`,
    `- Target (issue 15): ≥ ${fmt(TARGET.requestsPerSec)} POST /orders per second with p99 ≤ ${TARGET.p99Ms} ms at ${TARGET.connections} connections on the 2-core build machine`,
    '',
    '| Scenario | Connections | Requests | Req/s (mean) | p50 (ms) | p99 (ms) | Max (ms) | Non-2xx | Errors | Target met |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---|',
  ];
  for (const s of scenarios) {
    const judged = s.name === 'POST /orders' && s.connections === TARGET.connections && !short;
    lines.push(
      `| ${s.name} | ${s.connections} | ${fmt(s.requests)} | ${fmt(s.requestsPerSecMean)} | ${fmt(s.latencyMs.p50)} | ${fmt(s.latencyMs.p99)} | ${fmt(s.latencyMs.max)} | ${s.non2xx} | ${s.errors} | ${judged ? (targetMet(s) ? 'yes' : 'no') : ''} |`,
    );
  }
  if (notes.length) lines.push('', ...notes.map((n) => `- ${n}`));
  return `${lines.join('\n')}\n`;
}

/** The service's record layout, which this bench does not set: the default of src/config.ts. */
const SERVICE_LAYOUT = layoutName(loadConfig({}).QUEUE_RECORD_GROUPS === '1');

/** This bench's rows of BENCHMARKS.md's current figures: each scenario at 50 connections. */
function currentRows(date: string, machine: Machine, scenarios: readonly Scenario[]): CurrentRow[] {
  return scenarios
    .filter((s) => s.connections === 50)
    .map((s) => ({
      figure: `HTTP ${s.name}, 50 connections: requests/s (p99 ms)`,
      ours: `${fmt(s.requestsPerSecMean)} (${fmt(s.latencyMs.p99)})`,
      layout: SERVICE_LAYOUT,
      measured: `${date.slice(0, 10)}, ${machine.cpu.replace(/\(R\)/g, '').replace(/ Processor$/, '')}, ${machine.cores} cores`,
      commit: benchCommit(),
      command: '`npm run bench:http`',
    }));
}

/**
 * Inserts the section below the HTTP marker, creating "# HTTP API benchmark" with
 * its marker at the end of the file when absent. The queue benchmark (report.ts)
 * rewrites everything above its own marker and keeps everything below it, so the
 * HTTP part lives after the queue runs and survives its rewrites; it never touches
 * the queue sections.
 */
export function writeSection(section: string, file = REPORT_FILE): string {
  return writeMarkedSection(
    section,
    {
      heading: HTTP_HEADING,
      intro: [
        'How to run: `npm run bench:http` (PostgreSQL at `BENCH_PG_URL`, default `postgresql://postgres@127.0.0.1:5432/postgres`,',
        'and Redis at `REDIS_URL`). It creates its own database and queue prefix and removes both afterwards.',
        'Short runs: `BENCH_DURATION_S=3`; `BENCH_WRITE=0` skips this file. Each pay request pays a different',
        'UNPAID order created beforehand through the API. The JSON document on stdout holds every figure.',
      ],
      marker: HTTP_MARKER,
    },
    file,
  );
}

// ---------------------------------------------------------------- main
async function main(): Promise<void> {
  const date = new Date().toISOString();
  log(`run ${runTag}: database ${dbName}, queue prefix ${queuePrefix}, ${cfg.durationS} s per scenario`);
  const run = openBenchRun({
    connectionName: 'bench-http',
    dbName,
    pgAdminUrl: cfg.pgAdminUrl,
    redisUrl: cfg.redisUrl,
    keyPatterns: [`${queuePrefix}:*`],
    log,
  });
  const { redis } = run;

  try {
    await redis.connect();
    const versions = { redis: await redisVersion(redis), postgres: await postgresVersion(cfg.pgAdminUrl) };
    await run.createDatabase();

    const t0 = performance.now();
    const service = await run.startService(
      {
        LOG_LEVEL: process.env.BENCH_SERVICE_LOG_LEVEL ?? 'warn',
        QUEUE_PREFIX: queuePrefix,
        DATABASE_POOL_SIZE: String(cfg.dbPool),
        ORDER_PAYMENT_TIMEOUT_SECONDS: '3600',
      },
      cfg.cpuProfDir ? ['--cpu-prof', `--cpu-prof-dir=${cfg.cpuProfDir}`] : [],
    );
    log(`service up on ${service.baseUrl} after ${Math.round(performance.now() - t0)} ms (migrations included)`);

    if (cfg.warmupS > 0) {
      log(`warm-up: POST /orders for ${cfg.warmupS} s`);
      const w = await runCreate(service, 10, cfg.warmupS);
      if (w.non2xx || w.errors) log(`warm-up saw ${w.non2xx} non-2xx and ${w.errors} errors`);
    }

    const scenarios: Scenario[] = [];
    for (const c of cfg.createConnections) {
      await sleep(500);
      log(`POST /orders, ${c} connections, ${cfg.durationS} s`);
      const s = summarise('POST /orders', c, await runCreate(service, c, cfg.durationS));
      scenarios.push(s);
      log(`  ${s.requestsPerSecMean} req/s, p50 ${s.latencyMs.p50} ms, p99 ${s.latencyMs.p99} ms, non-2xx ${s.non2xx}, errors ${s.errors}`);
    }

    let payChecks: { pay2xx: number; paidInDb: number; idsUsed: number } | undefined;
    if (cfg.payConnections.length && cfg.payOrders > 0) {
      // Make sure enough UNPAID orders exist, all created through the API (so each has its expiry job).
      const [{ n: have } = { n: 0 }] = await pgQuery<{ n: number }>(dbUrl, `SELECT count(*)::int AS n FROM orders WHERE status = 'UNPAID'`);
      const warmPays = 200;
      const need = cfg.payOrders + warmPays;
      if (have < need) {
        log(`creating ${need - have} more orders for the pay scenarios (have ${have})`);
        const r = await autocannon({ ...createOptions(service, 50), amount: need - have });
        if (r.non2xx || r.errors) log(`  order creation saw ${r.non2xx} non-2xx and ${r.errors} errors`);
      }
      const all = await unpaidIds(need);
      const warm = all.slice(0, warmPays);
      const pool = all.slice(warmPays);
      log(`pay warm-up on ${warm.length} orders`);
      await runPay(service, 10, 30, warm);

      const per = Math.floor(pool.length / cfg.payConnections.length);
      let pay2xx = 0;
      let idsUsed = 0;
      for (const [i, c] of cfg.payConnections.entries()) {
        await sleep(500);
        const ids = pool.slice(i * per, (i + 1) * per);
        log(`POST /orders/:id/pay, ${c} connections, ${cfg.durationS} s, up to ${ids.length} distinct UNPAID orders`);
        const { result, used } = await runPay(service, c, cfg.durationS, ids);
        const s = summarise('POST /orders/:id/pay', c, result);
        scenarios.push(s);
        pay2xx += result['2xx'];
        idsUsed += used;
        if (used >= ids.length) log(`  note: all ${ids.length} ids were used before the duration ended (raise BENCH_PAY_ORDERS)`);
        log(`  ${s.requestsPerSecMean} req/s, p50 ${s.latencyMs.p50} ms, p99 ${s.latencyMs.p99} ms, non-2xx ${s.non2xx}, errors ${s.errors}`);
      }
      await sleep(500);
      const [{ n: paidInDb } = { n: 0 }] = await pgQuery<{ n: number }>(
        dbUrl,
        `SELECT count(*)::int AS n FROM orders WHERE status = 'PAID' AND id = ANY($1::uuid[])`,
        [pool],
      );
      payChecks = { pay2xx, paidInDb, idsUsed };
    }

    const machine: Machine = machineInfo(versions);
    const bad = scenarios.filter((s) => s.non2xx || s.errors);
    const notes: string[] = [];
    if (bad.length) notes.push(`non-2xx or errors in: ${bad.map((s) => `${s.name} c${s.connections} (${s.non2xx} non-2xx, ${s.errors} errors)`).join('; ')}`);
    if (payChecks) {
      notes.push(
        `Pay: ${payChecks.idsUsed} distinct UNPAID orders sent, ${payChecks.pay2xx} answered 2xx, ${payChecks.paidInDb} PAID in the database afterwards (requests in flight when a scenario stops may be paid without being counted).`,
      );
    }
    const doc = {
      benchmark: 'http-orders',
      date,
      runTag,
      settings: {
        durationS: cfg.durationS,
        warmupS: cfg.warmupS,
        dbPoolSize: cfg.dbPool,
        idempotencyKey: cfg.idempotencyKey,
        payOrders: cfg.payOrders,
        body: JSON.parse(ORDER_BODY) as unknown,
      },
      machine,
      target: { ...TARGET, scenario: 'POST /orders', judged: cfg.durationS >= 10 },
      scenarios: scenarios.map((s) => ({
        ...s,
        ...(s.name === 'POST /orders' ? { targetMet: targetMet(s) } : {}),
      })),
      payChecks,
      allNon2xxZero: bad.length === 0,
    };
    process.stdout.write(`${JSON.stringify(doc, null, 2)}\n`);
    if (cfg.write) {
      log(`wrote ${writeSection(markdownSection(date, machine, scenarios, notes))}`);
      // Only a full-length run stands for the current figures.
      if (cfg.durationS >= 10) log(`wrote ${updateCurrentFigures(currentRows(date, machine, scenarios))}`);
    } else log('BENCH_WRITE=0: bench/HISTORY.md and BENCHMARKS.md left alone');
    if (bad.length) process.exitCode = 1;
  } finally {
    await run.cleanup();
  }
}

// Run only as a script (importing it, e.g. to reuse writeSection, starts nothing).
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((err: unknown) => {
    process.stderr.write(`bench:http failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  });
}
