// End-to-end benchmark of the business effect: orders the service cancels
// itself, with API and workers in one process as `npm start` runs them, on a
// fresh database of the local PostgreSQL and a queue prefix of its own on the
// local Redis. Prints one JSON document on stdout and inserts a section into
// BENCHMARKS.md under "# End-to-end benchmark".
//
// Scenarios (issue 15's figures; the reminders' will join them):
// - expiry stream: orders created through POST /orders at BENCH_E2E_RATE a
//   second for BENCH_E2E_SECONDS, each expiring a fixed payment window after
//   its creation, the window longer than the creation, so the expiries fall
//   due at the rate the creation reached and on a service doing nothing else.
//   Lateness = cancelled_at - expires_at, both on the database's clock.
// - overdue drain: BENCH_E2E_OVERDUE orders created through an API-only
//   process (their expiry jobs written, no worker running) with a 1 s payment
//   window, as after an outage of the workers; then the service starts: the
//   cancellations a second, from the first to the last on the database's
//   clock (its workers and its reconciliation pass both work them off).
//
// Run: `npm run bench:e2e` (`npm run --silent bench:e2e > out.json` keeps
// npm's banner out of the JSON). Knobs (environment):
//   BENCH_E2E_RATE=2000        orders a second asked of the stream
//   BENCH_E2E_SECONDS=60       length of the stream
//   BENCH_E2E_OVERDUE=100000   orders of the drain
//   BENCH_E2E_CONNECTIONS=50   connections of the load generator
//   BENCH_WRITE=0              do not touch BENCHMARKS.md
//   BENCH_PG_URL, REDIS_URL, BENCH_DB_POOL, BENCH_SERVICE_LOG_LEVEL as in bench:http
import { randomBytes } from 'node:crypto';
import {
  autocannon,
  DEFAULT_PG_ADMIN_URL,
  DEFAULT_REDIS_URL,
  fmt,
  type Machine,
  machineInfo,
  machineLines,
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
  writeMarkedSection,
} from './http-harness.js';
import { until } from './bench-util.js';

const HEADING = '# End-to-end benchmark';
const MARKER = '<!-- e2e runs: newest first -->';
const TARGET = { streamP99Ms: 20, streamMaxMs: 100, drainPerSec: 10_000 } as const;

const cfg = {
  rate: Math.floor(num('BENCH_E2E_RATE', 2_000)),
  seconds: num('BENCH_E2E_SECONDS', 60),
  overdue: Math.floor(num('BENCH_E2E_OVERDUE', 100_000)),
  connections: Math.floor(num('BENCH_E2E_CONNECTIONS', 50)),
  dbPool: Math.max(1, Math.floor(num('BENCH_DB_POOL', 10))),
  /** Which scenarios run (a profile of one needs the other left out). */
  scenarios: (process.env.BENCH_E2E_SCENARIOS ?? 'stream,drain').split(',').map((x) => x.trim()),
  write: process.env.BENCH_WRITE !== '0',
  pgAdminUrl: process.env.BENCH_PG_URL ?? DEFAULT_PG_ADMIN_URL,
  redisUrl: process.env.REDIS_URL ?? DEFAULT_REDIS_URL,
};
const runTag = randomBytes(4).toString('hex');
const dbName = `ots_bench_e2e_${runTag}`;
const queuePrefix = `bench_e2e_${runTag}`;
const dbUrl = withDatabase(cfg.pgAdminUrl, dbName);
const log = makeLog('bench:e2e');

/** Each scenario's orders are told apart by their customer. */
const STREAM = 'cust-stream';
const DRAIN = 'cust-drain';
const orderBody = (customerId: string) => JSON.stringify({ customerId, currency: 'EUR', items: [{ sku: 'SKU-1', quantity: 1, unitPriceCents: 1_000 }] });

type Lateness = { count: number; p50: number; p99: number; max: number; mean: number };
type Stream = { asked: number; created: number; createdPerSec: number; non2xx: number; windowS: number; cancelled: number; latenessMs: Lateness | null };
type Drain = { orders: number; created: number; cancelled: number; seconds: number; perSec: number };

const count = async (where: string, params: unknown[] = []) =>
  (await pgQuery<{ n: number }>(dbUrl, `SELECT count(*)::int AS n FROM orders WHERE ${where}`, params))[0]?.n ?? 0;

/** Creates orders through the API: paced at `rate` a second for `seconds`, or `amount` of them as fast as it goes. */
async function create(service: Service, customerId: string, o: { rate?: number; seconds?: number; amount?: number }) {
  return autocannon({
    url: `${service.baseUrl}/orders`,
    connections: cfg.connections,
    method: 'POST',
    headers: service.headers,
    body: orderBody(customerId),
    ...(o.rate ? { overallRate: o.rate } : {}),
    ...(o.seconds ? { duration: o.seconds } : {}),
    ...(o.amount ? { amount: o.amount } : {}),
  });
}

/** Whether `done` came to hold within `timeoutMs` (polled every 200 ms). */
const within = (done: () => Promise<boolean>, timeoutMs: number, what: string) =>
  until(done, timeoutMs, what, 200).then(
    () => true,
    () => false,
  );

async function stream(run: ReturnType<typeof openBenchRun>, env: Record<string, string>): Promise<Stream> {
  // Expiries start once creation is over: the window is the stream plus 10 s.
  const windowS = Math.ceil(cfg.seconds) + 10;
  const service = await run.startService({ ...env, ORDER_PAYMENT_TIMEOUT_SECONDS: String(windowS) });
  try {
    log(`stream: POST /orders at ${cfg.rate}/s for ${cfg.seconds} s, each expiring ${windowS} s later`);
    const r = await create(service, STREAM, { rate: cfg.rate, seconds: cfg.seconds });
    const created = await count('customer_id = $1', [STREAM]);
    log(`  created ${created} (${round(created / cfg.seconds, 1)}/s), ${r.non2xx} non-2xx; waiting for their expiries`);
    await within(async () => (await count(`customer_id = $1 AND status = 'UNPAID'`, [STREAM])) === 0, (windowS + 120) * 1_000, 'the stream to expire');
    const rows = await pgQuery<Lateness>(
      dbUrl,
      `SELECT count(*)::int AS count,
              percentile_disc(0.5) WITHIN GROUP (ORDER BY ms) AS p50,
              percentile_disc(0.99) WITHIN GROUP (ORDER BY ms) AS p99,
              max(ms) AS max, round(avg(ms)::numeric, 2)::float8 AS mean
         FROM (SELECT extract(epoch FROM cancelled_at - expires_at)::float8 * 1000 AS ms FROM orders WHERE customer_id = $1 AND status = 'CANCELLED') t`,
      [STREAM],
    );
    const l = rows[0];
    const latenessMs = l && l.count > 0 ? { count: l.count, p50: round(l.p50, 1), p99: round(l.p99, 1), max: round(l.max, 1), mean: l.mean } : null;
    return {
      asked: Math.round(cfg.rate * cfg.seconds),
      created,
      createdPerSec: round(created / cfg.seconds, 1),
      non2xx: r.non2xx,
      windowS,
      cancelled: l?.count ?? 0,
      latenessMs,
    };
  } finally {
    await run.stopService();
  }
}

async function drain(run: ReturnType<typeof openBenchRun>, env: Record<string, string>): Promise<Drain> {
  // The API alone: orders and their expiry jobs are written, nobody works them off.
  const api = await run.startService({ ...env, ORDER_PAYMENT_TIMEOUT_SECONDS: '1' }, [], 'api');
  try {
    log(`drain: ${cfg.overdue} orders through an API-only process, no worker running`);
    const r = await create(api, DRAIN, { amount: cfg.overdue });
    if (r.non2xx) log(`  ${r.non2xx} non-2xx`);
  } finally {
    await run.stopService();
  }
  const created = await count('customer_id = $1', [DRAIN]);
  await sleep(1_500); // every one overdue
  const t0 = performance.now();
  await run.startService(env);
  log(`  service ready after ${Math.round(performance.now() - t0)} ms`);
  const done = await within(async () => (await count(`customer_id = $1 AND status = 'UNPAID'`, [DRAIN])) === 0, 600_000, 'the drain');
  await run.stopService();
  if (!done) log('  not drained within 10 minutes');
  // The workers start before the API answers: the drain is timed by the
  // database, from the first cancellation to the last.
  const [t] = await pgQuery<{ n: number; s: number | null }>(
    dbUrl,
    `SELECT count(*)::int AS n, extract(epoch FROM max(cancelled_at) - min(cancelled_at))::float8 AS s
       FROM orders WHERE customer_id = $1 AND status = 'CANCELLED'`,
    [DRAIN],
  );
  const cancelled = t?.n ?? 0;
  const seconds = t?.s ?? 0;
  return { orders: cfg.overdue, created, cancelled, seconds: round(seconds, 2), perSec: seconds > 0 ? round(cancelled / seconds, 0) : 0 };
}

function markdown(date: string, machine: Machine, s: Stream, d: Drain): string {
  const l = s.latenessMs;
  return [
    `## ${date}`,
    '',
    ...machineLines(machine),
    `- Orders through POST /orders with ${cfg.connections} connections; service as \`npm start\` runs it (API and workers, one process), DATABASE_POOL_SIZE ${cfg.dbPool}.`,
    '',
    '| Scenario | Figure | Target | Met |',
    '|---|---|---|---|',
    `| Expiry stream, asked ${fmt(cfg.rate)}/s for ${cfg.seconds} s | created ${fmt(s.created)} (${fmt(s.createdPerSec)}/s), cancelled ${fmt(s.cancelled)}; lateness p50 ${l ? fmt(l.p50) : '—'} / p99 ${l ? fmt(l.p99) : '—'} / max ${l ? fmt(l.max) : '—'} ms | p99 ≤ ${TARGET.streamP99Ms}, max ≤ ${TARGET.streamMaxMs} ms at 2 000/s | ${l && s.createdPerSec >= 2_000 ? (l.p99 <= TARGET.streamP99Ms && l.max <= TARGET.streamMaxMs ? 'yes' : 'no') : 'not judged'} |`,
    `| Overdue drain, ${fmt(d.created)} orders | ${fmt(d.perSec)} cancellations/s (${fmt(d.cancelled)} in ${fmt(d.seconds)} s, first to last) | ≥ ${fmt(TARGET.drainPerSec)}/s | ${d.created >= 100_000 ? (d.perSec >= TARGET.drainPerSec ? 'yes' : 'no') : 'not judged'} |`,
    '',
  ].join('\n');
}

async function main(): Promise<void> {
  const date = new Date().toISOString();
  log(`run ${runTag}: database ${dbName}, queue prefix ${queuePrefix}`);
  const run = openBenchRun({ connectionName: 'bench-e2e', dbName, pgAdminUrl: cfg.pgAdminUrl, redisUrl: cfg.redisUrl, keyPatterns: [`${queuePrefix}:*`], log });
  try {
    await run.redis.connect();
    const versions = { redis: await redisVersion(run.redis), postgres: await postgresVersion(cfg.pgAdminUrl) };
    await run.createDatabase();
    const env = { LOG_LEVEL: process.env.BENCH_SERVICE_LOG_LEVEL ?? 'warn', QUEUE_PREFIX: queuePrefix, DATABASE_POOL_SIZE: String(cfg.dbPool) };
    const s = cfg.scenarios.includes('stream') ? await stream(run, env) : null;
    if (s) log(`  stream: ${JSON.stringify(s.latenessMs)}`);
    const d = cfg.scenarios.includes('drain') ? await drain(run, env) : null;
    if (d) log(`  drain: ${JSON.stringify(d)}`);
    const machine = machineInfo(versions);
    process.stdout.write(
      `${JSON.stringify({ benchmark: 'e2e-orders', date, runTag, settings: cfg, machine, target: TARGET, stream: s, drain: d }, null, 2)}\n`,
    );
    // A partial run (a profile) is not a row of the record.
    if (cfg.write && s && d) {
      const intro = [
        'How to run: `npm run bench:e2e` (PostgreSQL at `BENCH_PG_URL`, Redis at `REDIS_URL`); knobs at the top of',
        '`bench/e2e.bench.ts`. Lateness is `cancelled_at - expires_at` on the database clock. The JSON on stdout holds every figure.',
      ];
      log(`wrote ${writeMarkedSection(markdown(date, machine, s, d), { heading: HEADING, intro, marker: MARKER })}`);
    }
  } finally {
    await run.cleanup();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`bench:e2e failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
