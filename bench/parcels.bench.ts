// Parcel intake benchmark, two paths:
//   1. Lua alone: createBatcher (src/queue/batcher.ts) on the local Redis, one
//      batch-add script call per parcel, parcels spread round-robin over 50 areas,
//      a fixed number of adds in flight; once on a plain ioredis client and once on
//      one with enableAutoPipelining. Parcels/s, FULL batches returned by the
//      script, Redis CPU per add (INFO commandstats evalsha usec delta / adds).
//   2. HTTP: the real service (`node --import tsx src/main.ts all`) on a fresh
//      PostgreSQL database and its own queue prefix; 50 areas created through
//      PUT /areas/:code, then autocannon POST /parcels with a unique tracking number
//      per request. Afterwards PostgreSQL is checked: every parcel row BATCHED or
//      WAITING, the rows are exactly the parcels answered 2xx (plus those in flight
//      when autocannon stopped), WAITING per area below the batch size and equal to
//      what Redis holds for the area. Each HTTP run also reports CPU per parcel
//      from /proc: the PostgreSQL server's and the service process's (when they
//      run on this machine).
// Prints one JSON document on stdout (progress on stderr) and inserts a section
// into bench/HISTORY.md under "# Parcel intake benchmark".
//
// Run: `npm run bench:parcels`. Needs Redis and PostgreSQL (trust auth) locally.
// Knobs (environment):
//   BENCH_SCALE=1              multiplies the Lua-path parcel count (200 000)
//   BENCH_IN_FLIGHT=256        Lua path: adds in flight
//   BENCH_DURATION_S=10        HTTP path: seconds of POST /parcels
//   BENCH_WARMUP_S=2           HTTP path: seconds of POST /parcels before measuring (own tracking numbers)
//   BENCH_PARCEL_CONNECTIONS=20  HTTP path: autocannon connections
//   BENCH_BATCH_CONNECTIONS=4  HTTP path: POST /parcels/batch connections (1 000 parcels a request; 0: none)
//   BENCH_DB_POOL=10           DATABASE_POOL_SIZE of the service
//   BENCH_ONLY=lua|http        run one path only
//   BENCH_WRITE=0              do not touch bench/HISTORY.md
//   BENCH_PG_URL               admin URL (default postgresql://postgres@127.0.0.1:5432/postgres)
//   REDIS_URL                  default redis://127.0.0.1:6379
//   BENCH_SERVICE_LOG_LEVEL    LOG_LEVEL of the service (default warn); its logs go to stderr
// Short run: `BENCH_SCALE=0.1 BENCH_DURATION_S=3 BENCH_WRITE=0 npm run -s bench:parcels`.
// Teardown always runs: SIGTERM to the service, DROP DATABASE ... WITH (FORCE),
// SCAN + DEL of the run's own Redis keys (never FLUSHDB/FLUSHALL).
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { Redis } from 'ioredis';
import { createBatcher } from '../src/queue/batcher/batcher.js';
import { redisCpuSeconds } from './bench-util.js';
import {
  type AcResult,
  autocannon,
  cpuMark,
  type CpuPerItem,
  cpuPerItem,
  DEFAULT_PG_ADMIN_URL,
  DEFAULT_REDIS_URL,
  deleteKeysMatching,
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
  REPORT_FILE,
  round,
  type Scenario,
  type Service,
  sleep,
  summarise,
  writeMarkedSection,
} from './http-harness.js';

// ---------------------------------------------------------------- settings
const HEADING = '# Parcel intake benchmark';
const MARKER = '<!-- parcel runs: newest first -->';
const TARGET = { luaParcelsPerSec: 30_000 } as const;
const AREAS = 50;
const BATCH_SIZE = 10;
const MAX_WAIT_SECONDS = 240;
/** Parcels in one POST /parcels/batch request (the most it takes). */
const BATCH_PER_REQUEST = 1_000;
const LUA_PARCELS = 200_000;

const only = process.env.BENCH_ONLY ?? '';
if (only && only !== 'lua' && only !== 'http') throw new Error(`BENCH_ONLY must be lua or http (got ${JSON.stringify(only)})`);
const cfg = {
  scale: num('BENCH_SCALE', 1),
  inFlight: Math.max(1, Math.floor(num('BENCH_IN_FLIGHT', 256))),
  durationS: num('BENCH_DURATION_S', 10),
  warmupS: num('BENCH_WARMUP_S', 2),
  connections: Math.max(1, Math.floor(num('BENCH_PARCEL_CONNECTIONS', 20))),
  /** POST /parcels/batch connections (0: no batch run). */
  batchConnections: Math.max(0, Math.floor(num('BENCH_BATCH_CONNECTIONS', 4))),
  dbPool: Math.max(1, Math.floor(num('BENCH_DB_POOL', 10))),
  lua: only !== 'http',
  http: only !== 'lua',
  write: process.env.BENCH_WRITE !== '0',
  pgAdminUrl: process.env.BENCH_PG_URL ?? DEFAULT_PG_ADMIN_URL,
  redisUrl: process.env.REDIS_URL ?? DEFAULT_REDIS_URL,
};
const luaParcels = Math.max(1, Math.round(LUA_PARCELS * cfg.scale));
const runTag = randomBytes(4).toString('hex');
const dbName = `ots_bench_parcels_${runTag}`;
const queuePrefix = `bench_parcels_${runTag}`;
const areaCodes = Array.from({ length: AREAS }, (_, i) => `A${i}`);
const log = makeLog('bench:parcels');

const short = () => cfg.scale < 1 || cfg.durationS < 10;

// ---------------------------------------------------------------- Redis figures
type ScriptStats = { calls: number; usec: number; failed: number };

async function scriptStats(redis: Redis): Promise<{ evalsha: ScriptStats; eval: ScriptStats; cpuSec: number }> {
  const stats = await redis.info('commandstats');
  const pick = (cmd: string): ScriptStats => {
    const line = new RegExp(`^cmdstat_${cmd}:(.*)$`, 'm').exec(stats)?.[1] ?? '';
    const field = (f: string) => Number(new RegExp(`(?:^|,)${f}=([0-9.]+)`).exec(line)?.[1] ?? 0);
    return { calls: field('calls'), usec: field('usec'), failed: field('failed_calls') };
  };
  return { evalsha: pick('evalsha'), eval: pick('eval'), cpuSec: await redisCpuSeconds(redis) };
}

function percentile(sorted: Float64Array, q: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] as number;
}

// ---------------------------------------------------------------- path 1: the script alone
export type LuaResult = {
  client: 'plain' | 'autoPipelining';
  parcels: number;
  inFlight: number;
  seconds: number;
  parcelsPerSec: number;
  addLatencyMs: { p50: number; p99: number; max: number };
  added: number;
  fullBatches: number;
  expectedFullBatches: number;
  otherTakes: number;
  takenItems: number;
  waitingLeft: number;
  problems: string[];
  redis: {
    evalshaCalls: number;
    evalCalls: number;
    scriptUsecPerAdd: number;
    evalshaUsecPerAdd: number;
    processCpuUsecPerAdd: number;
    /** CPU of this (client) process per add: ioredis, the batcher wrapper, the bookkeeping here. */
    clientCpuUsecPerAdd: number;
    /** Script calls by other clients of the same Redis during the run (they inflate the figures above). */
    foreignScriptCalls: number;
  };
  targetMet: boolean;
};

async function runLua(kind: LuaResult['client'], admin: Redis): Promise<LuaResult> {
  const name = `bench-parcels-${runTag}-${kind === 'plain' ? 'plain' : 'auto'}`;
  const redis = new Redis(cfg.redisUrl, {
    connectionName: `bench-parcels-${kind}`,
    maxRetriesPerRequest: 3,
    ...(kind === 'autoPipelining' ? { enableAutoPipelining: true } : {}),
  });
  const pattern = `bq:{${name}:*`;
  try {
    const batcher = createBatcher(redis, { name, prefix: 'bq', batchSize: BATCH_SIZE, maxWaitMs: MAX_WAIT_SECONDS * 1_000 });
    // Loads the script (EVALSHA, or EVAL after NOSCRIPT) before the clock starts.
    await batcher.add('warm', 'warm-1');
    await batcher.remove('warm', ['warm-1']);

    const n = luaParcels;
    const latencies = new Float64Array(n);
    const seen = new Set<string>();
    const problems: string[] = [];
    const note = (p: string) => {
      if (problems.length < 20) problems.push(p);
    };
    let added = 0;
    let fullBatches = 0;
    let otherTakes = 0;
    let takenItems = 0;
    let next = 0;

    const before = await scriptStats(admin);
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    const lane = async () => {
      for (;;) {
        const i = next++;
        if (i >= n) return;
        const area = i % AREAS;
        const s = performance.now();
        const r = await batcher.add(areaCodes[area] as string, `BP-${i}`);
        latencies[i] = performance.now() - s;
        if (r.added) added++;
        else note(`BP-${i}: not added (already waiting?)`);
        const taken = r.batches.flat();
        if (taken.length === 0) continue;
        if (r.batches.length === 1 && taken.length === BATCH_SIZE) fullBatches++;
        else {
          otherTakes++;
          note(`BP-${i}: the script returned ${r.batches.length} batches of ${taken.length} in all`);
        }
        takenItems += taken.length;
        for (const t of taken) {
          if (seen.has(t.item)) note(`${t.item} taken twice`);
          seen.add(t.item);
          if (Number(t.item.slice(3)) % AREAS !== area) note(`${t.item} taken in a batch of area A${area}`);
        }
      }
    };
    await Promise.all(Array.from({ length: cfg.inFlight }, lane));
    const seconds = (performance.now() - t0) / 1_000;
    const cpu = process.cpuUsage(cpu0);
    const after = await scriptStats(admin);

    let waitingLeft = 0;
    for (const a of areaCodes) waitingLeft += (await batcher.waiting(a)).count;
    let expectedFullBatches = 0;
    for (let a = 0; a < AREAS; a++) expectedFullBatches += Math.floor((Math.floor(n / AREAS) + (a < n % AREAS ? 1 : 0)) / BATCH_SIZE);
    if (fullBatches !== expectedFullBatches) note(`${fullBatches} full batches, expected ${expectedFullBatches}`);
    if (waitingLeft + takenItems !== n) note(`${takenItems} taken + ${waitingLeft} waiting != ${n} added`);

    latencies.sort();
    const evalshaCalls = after.evalsha.calls - before.evalsha.calls;
    const evalCalls = after.eval.calls - before.eval.calls;
    const evalshaUsec = after.evalsha.usec - before.evalsha.usec;
    const scriptUsec = evalshaUsec + (after.eval.usec - before.eval.usec);
    const parcelsPerSec = round(n / seconds, 0);
    return {
      client: kind,
      parcels: n,
      inFlight: cfg.inFlight,
      seconds: round(seconds, 3),
      parcelsPerSec,
      addLatencyMs: { p50: round(percentile(latencies, 0.5)), p99: round(percentile(latencies, 0.99)), max: round(percentile(latencies, 1)) },
      added,
      fullBatches,
      expectedFullBatches,
      otherTakes,
      takenItems,
      waitingLeft,
      problems,
      redis: {
        evalshaCalls,
        evalCalls,
        scriptUsecPerAdd: round(scriptUsec / n),
        evalshaUsecPerAdd: round(evalshaUsec / n),
        processCpuUsecPerAdd: round(((after.cpuSec - before.cpuSec) * 1e6) / n),
        clientCpuUsecPerAdd: round((cpu.user + cpu.system) / n),
        foreignScriptCalls: Math.max(0, evalshaCalls + evalCalls - n),
      },
      targetMet: parcelsPerSec >= TARGET.luaParcelsPerSec,
    };
  } finally {
    const deleted = await deleteKeysMatching(admin, pattern).catch((err: unknown) => (log(`deleting ${pattern} failed: ${String(err)}`), -1));
    log(`deleted ${deleted} Redis keys under ${pattern}`);
    redis.disconnect();
  }
}

// ---------------------------------------------------------------- path 2: HTTP
export type HttpResult = {
  scenario: Scenario;
  /** POST /parcels/batch after the single-parcel run: parcels a second through it, every one answered and in the database. */
  batch: {
    requests: number;
    parcels: number;
    parcelsPerSec: number;
    latencyMs: { p50: number; p99: number };
    refused: number;
    rows: number;
    cpuUsPerParcel: CpuPerItem;
  } | null;
  /** CPU per parcel answered in the single-parcel run. */
  cpuUsPerParcel: CpuPerItem;
  warmup: { seconds: number; answered2xx: number; non2xx: number; errors: number } | null;
  sent: number;
  answered2xx: number;
  non2xxSamples: { status: number; body: string }[];
  db: {
    rows: number;
    byStatus: Record<string, number>;
    measuredRows: number;
    answeredWithoutRow: number;
    rowsWithoutAnswer: number;
    batches: Record<string, { batches: number; parcels: number }>;
    waitingAreasAtOrAboveBatchSize: number;
    areasWhereRedisDiffers: number;
  };
  problems: string[];
  notes: string[];
};

type PostRun = { result: AcResult; sent: number; ok: Set<string>; non2xx: { status: number; body: string }[] };

async function postParcels(service: Service, prefix: string, durationS: number, connections: number): Promise<PostRun> {
  let next = 0;
  const ok = new Set<string>();
  const non2xx: { status: number; body: string }[] = [];
  const result = await autocannon({
    url: service.baseUrl,
    connections,
    duration: durationS,
    requests: [
      {
        method: 'POST',
        path: '/parcels',
        headers: service.headers,
        // Called once per request built (one more per connection than sent): every request a new parcel.
        setupRequest: (req) => {
          const i = next++;
          return { ...req, body: JSON.stringify({ trackingNo: `${prefix}-${i}`, area: areaCodes[i % AREAS] }) };
        },
        onResponse: (status, body) => {
          if (status === 200 || status === 202) {
            const m = /"trackingNo":"([^"]+)"/.exec(body);
            if (m) ok.add(m[1] as string);
          } else if (non2xx.length < 5) non2xx.push({ status, body: body.slice(0, 300) });
        },
      },
    ],
  });
  return { result, sent: next, ok, non2xx };
}

/**
 * POST /parcels/batch with BATCH_PER_REQUEST new parcels a request (round-robin
 * over the areas) for the run's duration; then every parcel answered is looked
 * for in PostgreSQL.
 */
async function postBatches(service: Service, dbUrl: string, prefix: string, problems: string[]): Promise<HttpResult['batch']> {
  if (cfg.batchConnections === 0) return null;
  let next = 0;
  let refused = 0;
  log(`POST /parcels/batch, ${BATCH_PER_REQUEST} parcels a request, ${cfg.batchConnections} connections, ${cfg.durationS} s`);
  const cpu0 = await cpuMark(service, dbUrl);
  const result = await autocannon({
    url: service.baseUrl,
    connections: cfg.batchConnections,
    duration: cfg.durationS,
    requests: [
      {
        method: 'POST',
        path: '/parcels/batch',
        headers: service.headers,
        setupRequest: (req) => {
          const parcels = Array.from({ length: BATCH_PER_REQUEST }, () => {
            const i = next++;
            return { trackingNo: `${prefix}-${i}`, area: areaCodes[i % AREAS] };
          });
          return { ...req, body: JSON.stringify({ parcels }) };
        },
        onResponse: (status, body) => {
          if (status !== 200) return;
          refused += (body.match(/"error":/g) ?? []).length;
        },
      },
    ],
  });
  const requests = result['2xx'];
  const parcels = requests * BATCH_PER_REQUEST;
  const cpu = cpuPerItem(cpu0, await cpuMark(service, dbUrl), parcels);
  const [{ n: rows } = { n: 0 }] = await pgQuery<{ n: number }>(dbUrl, 'SELECT count(*)::int AS n FROM parcels WHERE tracking_no LIKE $1', [`${prefix}-%`]);
  if (result.non2xx || result.errors) problems.push(`batch intake: ${result.non2xx} non-2xx, ${result.errors} errors`);
  if (refused) problems.push(`batch intake: ${refused} parcels refused`);
  // Requests in flight when autocannon stopped write rows whose answers it does not count: at most one per connection.
  if (rows < parcels || rows > parcels + cfg.batchConnections * BATCH_PER_REQUEST) problems.push(`batch intake: ${rows} rows for ${parcels} parcels answered`);
  const perSec = round(parcels / cfg.durationS, 0);
  log(
    `  ${fmt(perSec)} parcels/s (${requests} requests), p50 ${result.latency.p50} ms, p99 ${result.latency.p99} ms; CPU per parcel: PostgreSQL ${cpu.postgres ?? '?'} µs, service ${cpu.service ?? '?'} µs`,
  );
  return { requests, parcels, parcelsPerSec: perSec, latencyMs: { p50: result.latency.p50, p99: result.latency.p99 }, refused, rows, cpuUsPerParcel: cpu };
}

async function runHttp(run: ReturnType<typeof openBenchRun>): Promise<HttpResult> {
  const problems: string[] = [];
  const notes: string[] = [];
  const t0 = performance.now();
  const service = await run.startService({
    LOG_LEVEL: process.env.BENCH_SERVICE_LOG_LEVEL ?? 'warn',
    QUEUE_PREFIX: queuePrefix,
    DATABASE_POOL_SIZE: String(cfg.dbPool),
    PARCEL_BATCH_SIZE: String(BATCH_SIZE),
    PARCEL_MAX_WAIT_SECONDS: String(MAX_WAIT_SECONDS),
  });
  const { baseUrl } = service;
  log(`service up on ${baseUrl} after ${Math.round(performance.now() - t0)} ms (migrations included)`);

  for (const code of areaCodes) {
    const r = await fetch(`${baseUrl}/areas/${code}`, {
      method: 'PUT',
      headers: service.headers,
      body: JSON.stringify({ vehiclePlate: `V-${code}`, sorterContact: `sorter-${code}@example.com` }),
    });
    if (!r.ok) throw new Error(`PUT /areas/${code} answered ${r.status}: ${await r.text()}`);
  }
  log(`${AREAS} areas created`);

  let warmup: HttpResult['warmup'] = null;
  if (cfg.warmupS > 0) {
    log(`warm-up: POST /parcels for ${cfg.warmupS} s`);
    const w = await postParcels(service, `HW-${runTag}`, cfg.warmupS, cfg.connections);
    warmup = { seconds: cfg.warmupS, answered2xx: w.ok.size, non2xx: w.result.non2xx, errors: w.result.errors };
    if (w.result.non2xx || w.result.errors) log(`warm-up saw ${w.result.non2xx} non-2xx and ${w.result.errors} errors`);
    await sleep(500);
  }

  const measuredPrefix = `HP-${runTag}`;
  log(`POST /parcels, ${cfg.connections} connections, ${cfg.durationS} s`);
  const cpu0 = await cpuMark(service, run.dbUrl);
  const m = await postParcels(service, measuredPrefix, cfg.durationS, cfg.connections);
  const cpuUsPerParcel = cpuPerItem(cpu0, await cpuMark(service, run.dbUrl), m.result['2xx']);
  const scenario = summarise('POST /parcels', cfg.connections, m.result);
  log(
    `  ${scenario.requestsPerSecMean} req/s, p50 ${scenario.latencyMs.p50} ms, p99 ${scenario.latencyMs.p99} ms, non-2xx ${scenario.non2xx}, errors ${scenario.errors}, statuses ${JSON.stringify(scenario.statusCodes)}; CPU per parcel: PostgreSQL ${cpuUsPerParcel.postgres ?? '?'} µs, service ${cpuUsPerParcel.service ?? '?'} µs`,
  );
  const answered2xx = m.result['2xx'];
  const codes = scenario.statusCodes;
  const counted = (codes['200'] ?? 0) + (codes['202'] ?? 0);
  if (counted !== answered2xx) problems.push(`autocannon counted ${answered2xx} 2xx but ${counted} answers were 200/202 (${JSON.stringify(codes)})`);
  if (m.ok.size !== answered2xx) problems.push(`${answered2xx} 2xx answers but ${m.ok.size} distinct tracking numbers in them`);
  if ((codes['200'] ?? 0) > 0) notes.push(`${codes['200']} answers were 200 (an existing parcel) although every tracking number was new`);
  if (scenario.non2xx || scenario.errors) problems.push(`${scenario.non2xx} non-2xx, ${scenario.errors} errors, ${scenario.timeouts} timeouts`);

  const batch = await postBatches(service, run.dbUrl, `HB-${runTag}`, problems);

  // Requests in flight when autocannon stopped are still served: wait until the row count settles.
  const { dbUrl } = run;
  let rows = -1;
  for (let i = 0; i < 50; i++) {
    await sleep(200);
    const [{ n } = { n: 0 }] = await pgQuery<{ n: number }>(dbUrl, 'SELECT count(*)::int AS n FROM parcels');
    if (n === rows) break;
    rows = n;
  }

  const byStatus = Object.fromEntries(
    (await pgQuery<{ status: string; n: number }>(dbUrl, 'SELECT status::text AS status, count(*)::int AS n FROM parcels GROUP BY 1 ORDER BY 1')).map((r) => [
      r.status,
      r.n,
    ]),
  );
  const odd = Object.entries(byStatus).filter(([s]) => s !== 'BATCHED' && s !== 'WAITING');
  if (odd.length) problems.push(`parcel rows in other states: ${JSON.stringify(Object.fromEntries(odd))}`);

  const measured = new Set(
    (await pgQuery<{ t: string }>(dbUrl, 'SELECT tracking_no AS t FROM parcels WHERE tracking_no LIKE $1', [`${measuredPrefix}-%`])).map((r) => r.t),
  );
  let answeredWithoutRow = 0;
  for (const t of m.ok) if (!measured.has(t)) answeredWithoutRow++;
  let rowsWithoutAnswer = 0;
  for (const t of measured) if (!m.ok.has(t)) rowsWithoutAnswer++;
  if (answeredWithoutRow) problems.push(`${answeredWithoutRow} parcels answered 2xx have no row`);
  if (measured.size !== answered2xx) {
    const msg = `${measured.size} parcel rows for ${answered2xx} 2xx answers (${rowsWithoutAnswer} rows without a counted answer)`;
    // autocannon drops the answers of requests in flight when it stops: at most one per connection.
    if (rowsWithoutAnswer <= cfg.connections && answeredWithoutRow === 0 && scenario.non2xx === 0)
      notes.push(`${msg}: requests in flight when autocannon stopped`);
    else problems.push(msg);
  }

  const batches = Object.fromEntries(
    (
      await pgQuery<{ reason: string; b: number; p: number }>(
        dbUrl,
        'SELECT reason::text AS reason, count(*)::int AS b, coalesce(sum(parcel_count), 0)::int AS p FROM batches GROUP BY 1 ORDER BY 1',
      )
    ).map((r) => [r.reason, { batches: r.b, parcels: r.p }]),
  );
  const [{ n: wrongFull } = { n: 0 }] = await pgQuery<{ n: number }>(
    dbUrl,
    `SELECT count(*)::int AS n FROM batches b WHERE b.reason = 'FULL' AND (b.parcel_count <> $1 OR b.parcel_count <> (SELECT count(*) FROM parcels p WHERE p.batch_id = b.id))`,
    [BATCH_SIZE],
  );
  if (wrongFull) problems.push(`${wrongFull} FULL batches without exactly ${BATCH_SIZE} attached parcels`);
  const batchedRows = byStatus.BATCHED ?? 0;
  const batchedParcels = Object.values(batches).reduce((a, b) => a + b.parcels, 0);
  if (batchedRows !== batchedParcels) problems.push(`${batchedRows} BATCHED rows but the batches count ${batchedParcels} parcels`);

  // WAITING in PostgreSQL against the batcher's Redis groups (read only, same keys as the service).
  const waitingDb = new Map(
    (await pgQuery<{ a: string; n: number }>(dbUrl, `SELECT area_code AS a, count(*)::int AS n FROM parcels WHERE status = 'WAITING' GROUP BY 1`)).map((r) => [
      r.a,
      r.n,
    ]),
  );
  const view = createBatcher(run.redis, { name: 'parcels', prefix: `${queuePrefix}b`, batchSize: BATCH_SIZE, maxWaitMs: MAX_WAIT_SECONDS * 1_000 });
  let atOrAbove = 0;
  let differs = 0;
  const diffs: string[] = [];
  for (const a of areaCodes) {
    const db = waitingDb.get(a) ?? 0;
    const inRedis = (await view.waiting(a)).count;
    if (db >= BATCH_SIZE) atOrAbove++;
    if (db !== inRedis) {
      differs++;
      if (diffs.length < 5) diffs.push(`${a}: ${db} in PostgreSQL, ${inRedis} in Redis`);
    }
  }
  if (atOrAbove) problems.push(`${atOrAbove} areas hold ${BATCH_SIZE} or more WAITING parcels`);
  if (differs) problems.push(`WAITING differs between PostgreSQL and Redis in ${differs} areas (${diffs.join('; ')})`);
  if (m.non2xx.length) notes.push(`first non-2xx answers: ${m.non2xx.map((x) => `${x.status} ${x.body}`).join(' | ')}`);

  return {
    scenario,
    batch,
    cpuUsPerParcel,
    warmup,
    sent: m.sent,
    answered2xx,
    non2xxSamples: m.non2xx,
    db: {
      rows,
      byStatus,
      measuredRows: measured.size,
      answeredWithoutRow,
      rowsWithoutAnswer,
      batches,
      waitingAreasAtOrAboveBatchSize: atOrAbove,
      areasWhereRedisDiffers: differs,
    },
    problems,
    notes,
  };
}

// ---------------------------------------------------------------- report
export function markdownSection(date: string, machine: Machine, lua: LuaResult[], http: HttpResult | null, notes: string[]): string {
  const shortRun = short();
  const lines = [
    `## Parcel intake — ${date}${shortRun ? ` — scale ${cfg.scale}, ${cfg.durationS} s HTTP (short run, not judged against the target)` : ''}`,
    '',
    ...machineLines(machine),
    `- Lua path: \`createBatcher\` (prefix \`bq\`, batch size ${BATCH_SIZE}, max wait ${MAX_WAIT_SECONDS} s) on the local Redis, ${fmt(lua[0]?.parcels ?? luaParcels)} parcels round-robin over ${AREAS} areas (unique tracking numbers), ${lua[0]?.inFlight ?? cfg.inFlight} adds in flight on one ioredis connection; p50/p99 are per add`,
    `- HTTP path: \`node --import tsx src/main.ts all\`, PARCEL_BATCH_SIZE=${BATCH_SIZE}, PARCEL_MAX_WAIT_SECONDS=${MAX_WAIT_SECONDS}, DATABASE_POOL_SIZE=${cfg.dbPool}, LOG_LEVEL=warn; autocannon POST /parcels (unique tracking numbers over ${AREAS} areas) on the same machine; p50/p99 are per request`,
    `- Target (issue): ≥ ${fmt(TARGET.luaParcelsPerSec)} parcels/s through the script on one local Redis`,
    '',
    '| Path | Parcels | Parcels/s | p50 (ms) | p99 (ms) | FULL batches | Redis µs per add (evalsha) | Non-2xx | Target met |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---|',
  ];
  for (const r of lua) {
    lines.push(
      `| Lua, ${r.client === 'plain' ? 'plain ioredis' : 'ioredis auto-pipelining'}, ${r.inFlight} in flight | ${fmt(r.parcels)} | ${fmt(r.parcelsPerSec)} | ${fmt(r.addLatencyMs.p50)} | ${fmt(r.addLatencyMs.p99)} | ${fmt(r.fullBatches)} of ${fmt(r.expectedFullBatches)} | ${fmt(r.redis.evalshaUsecPerAdd)} |  | ${shortRun ? '' : r.targetMet ? 'yes' : 'no'} |`,
    );
  }
  if (http) {
    const s = http.scenario;
    const full = http.db.batches.FULL?.batches ?? 0;
    lines.push(
      `| HTTP POST /parcels, ${s.connections} connections, ${s.durationS} s | ${fmt(s.requests)} | ${fmt(s.requestsPerSecMean)} | ${fmt(s.latencyMs.p50)} | ${fmt(s.latencyMs.p99)} | ${fmt(full)} (in PostgreSQL) |  | ${s.non2xx} |  |`,
    );
    const b = http.batch;
    if (b)
      lines.push(
        `| HTTP POST /parcels/batch (${fmt(BATCH_PER_REQUEST)} a request), ${cfg.batchConnections} connections, ${cfg.durationS} s | ${fmt(b.parcels)} | ${fmt(b.parcelsPerSec)} | ${fmt(b.latencyMs.p50)} (request) | ${fmt(b.latencyMs.p99)} (request) | (in the row above) |  | ${b.refused} refused |  |`,
      );
  }
  if (notes.length) lines.push('', ...notes.map((n) => `- ${n}`));
  if (http) {
    const us = (v: number | null) => (v === null ? 'not on this machine' : `${fmt(v)} µs`);
    const cpu = (c: CpuPerItem) => `PostgreSQL ${us(c.postgres)}, service (Node) ${us(c.service)}`;
    lines.push(
      `- HTTP: CPU per parcel (from /proc over the run): POST /parcels ${cpu(http.cpuUsPerParcel)}${http.batch ? `; POST /parcels/batch ${cpu(http.batch.cpuUsPerParcel)}` : ''}.`,
    );
  }
  return `${lines.join('\n')}\n`;
}

export function writeSection(section: string, file = REPORT_FILE): string {
  return writeMarkedSection(
    section,
    {
      heading: HEADING,
      intro: [
        'How to run: `npm run bench:parcels` (Redis at `REDIS_URL`, PostgreSQL at `BENCH_PG_URL`, default',
        '`postgresql://postgres@127.0.0.1:5432/postgres`). The Lua path calls the batch-add script through',
        '`createBatcher` directly; the HTTP path drives the service on its own database and queue prefix, and',
        'checks the parcel rows afterwards. Both remove their keys and database. Short runs: `BENCH_SCALE=0.1',
        'BENCH_DURATION_S=3`; `BENCH_WRITE=0` skips this file. The JSON document on stdout holds every figure.',
      ],
      marker: MARKER,
    },
    file,
  );
}

// ---------------------------------------------------------------- main
function ioredisVersion(): string {
  try {
    const pkg = JSON.parse(readFileSync(new URL('../node_modules/ioredis/package.json', import.meta.url), 'utf8')) as { version?: string };
    return pkg.version ?? 'unknown';
  } catch {
    return 'unknown';
  }
}

async function main(): Promise<void> {
  const date = new Date().toISOString();
  log(
    `run ${runTag}: ${cfg.lua ? `${luaParcels} parcels through the script` : 'no Lua path'}; ${cfg.http ? `database ${dbName}, queue prefix ${queuePrefix}, ${cfg.durationS} s of POST /parcels` : 'no HTTP path'}`,
  );
  const run = openBenchRun({
    connectionName: 'bench-parcels',
    dbName,
    pgAdminUrl: cfg.pgAdminUrl,
    redisUrl: cfg.redisUrl,
    // The queue's keys and, beside them, the batcher's (prefix + "b").
    keyPatterns: [`${queuePrefix}:*`, `${queuePrefix}b:*`],
    log,
  });
  const { redis } = run;
  try {
    await redis.connect();
    const versions = { redis: await redisVersion(redis), postgres: await postgresVersion(cfg.pgAdminUrl) };
    const machine = machineInfo(versions);

    const lua: LuaResult[] = [];
    if (cfg.lua) {
      for (const kind of ['plain', 'autoPipelining'] as const) {
        await sleep(300);
        log(`Lua path, ${kind} client: ${luaParcels} adds, ${cfg.inFlight} in flight`);
        const r = await runLua(kind, redis);
        lua.push(r);
        log(
          `  ${r.parcelsPerSec} parcels/s, ${r.fullBatches} full batches (expected ${r.expectedFullBatches}), ${r.redis.evalshaUsecPerAdd} µs evalsha per add, Redis process ${r.redis.processCpuUsecPerAdd} µs CPU per add, client ${r.redis.clientCpuUsecPerAdd} µs CPU per add${r.problems.length ? `, PROBLEMS: ${r.problems.join('; ')}` : ''}`,
        );
      }
    }

    let http: HttpResult | null = null;
    if (cfg.http) {
      await run.createDatabase();
      http = await runHttp(run);
    }

    const notes: string[] = [];
    for (const r of lua) {
      const who = `Lua ${r.client}`;
      notes.push(
        `${who}: ${fmt(r.added)} added, ${fmt(r.takenItems)} taken in batches, ${fmt(r.waitingLeft)} left waiting; add latency max ${fmt(r.addLatencyMs.max)} ms; script time ${fmt(r.redis.scriptUsecPerAdd)} µs, Redis process CPU ${fmt(r.redis.processCpuUsecPerAdd)} µs and client (Node) CPU ${fmt(r.redis.clientCpuUsecPerAdd)} µs per add${r.redis.foreignScriptCalls ? ` (${fmt(r.redis.foreignScriptCalls)} script calls by other clients during the run inflate these)` : ''}.`,
      );
      for (const p of r.problems) notes.push(`${who} problem: ${p}`);
    }
    if (http) {
      const d = http.db;
      notes.push(
        `HTTP: statuses ${JSON.stringify(http.scenario.statusCodes)}; ${fmt(d.rows)} parcel rows (${Object.entries(d.byStatus)
          .map(([s, n]) => `${s} ${fmt(n)}`)
          .join(', ')}), ${fmt(d.measuredRows)} of them from the measured ${http.scenario.durationS} s for ${fmt(http.answered2xx)} 2xx answers; batches ${
          Object.entries(d.batches)
            .map(([r, b]) => `${r} ${fmt(b.batches)} (${fmt(b.parcels)} parcels)`)
            .join(', ') || 'none'
        }.`,
      );
      for (const n of http.notes) notes.push(`HTTP: ${n}`);
      for (const p of http.problems) notes.push(`HTTP problem: ${p}`);
    }

    const failed = lua.some((r) => r.problems.length > 0) || (http !== null && http.problems.length > 0);
    const doc = {
      benchmark: 'parcel-intake',
      date,
      runTag,
      settings: {
        scale: cfg.scale,
        areas: AREAS,
        batchSize: BATCH_SIZE,
        maxWaitSeconds: MAX_WAIT_SECONDS,
        luaParcels,
        inFlight: cfg.inFlight,
        durationS: cfg.durationS,
        warmupS: cfg.warmupS,
        connections: cfg.connections,
        dbPoolSize: cfg.dbPool,
        ioredis: ioredisVersion(),
      },
      machine,
      target: { ...TARGET, judged: !short() },
      lua,
      http,
      allChecksPassed: !failed,
    };
    process.stdout.write(`${JSON.stringify(doc, null, 2)}\n`);
    if (cfg.write) log(`wrote ${writeSection(markdownSection(date, machine, lua, http, notes))}`);
    else log('BENCH_WRITE=0: bench/HISTORY.md left alone');
    if (failed) process.exitCode = 1;
  } finally {
    await run.cleanup();
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((err: unknown) => {
    process.stderr.write(`bench:parcels failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  });
}
