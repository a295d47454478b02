// Shared harness of the benchmarks that drive the real service over HTTP
// (http.bench.ts, parcels.bench.ts): environment knobs, a fresh PostgreSQL
// database per run, the service as a child process (`node --import tsx
// src/main.ts all`) with a /readyz wait, autocannon and its summary, machine
// facts, one section of bench/HISTORY.md under its own heading and marker, and the
// run's own Redis keys deleted by SCAN + DEL (never FLUSHDB/FLUSHALL).
import { apiKeyStore } from '../src/core/auth/api-keys.js';
import { SCOPES } from '../src/core/auth/scopes.js';
import { DEFAULT_CLIENT } from '../src/core/auth/api-key-input.js';
import { createDb } from '../src/core/db.js';
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { createRequire } from 'node:module';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { freePort } from '../src/core/free-port.js';
import { processCpuSeconds, redisCpuSeconds } from './bench-util.js';
import { pgQuery, postgresCpuSeconds, postgresVersion } from './pg-util.js';

// ---------------------------------------------------------------- autocannon
// autocannon ships no types; only the parts used here are declared.
export type AcRequest = {
  method?: string;
  path?: string;
  headers?: Record<string, string>;
  body?: string;
  setupRequest?: (req: AcRequest, context: Record<string, unknown>) => AcRequest | undefined;
  onResponse?: (status: number, body: string, context: Record<string, unknown>, headers: Record<string, string>) => void;
};
export type AcOptions = {
  url: string;
  connections: number;
  duration?: number;
  amount?: number;
  maxOverallRequests?: number;
  method?: string;
  headers?: Record<string, string>;
  body?: string;
  requests?: AcRequest[];
  idReplacement?: boolean;
  timeout?: number;
};
export type AcHistogram = { mean: number; stddev: number; min: number; max: number; p50: number; p90: number; p99: number; total: number };
export type AcResult = {
  duration: number;
  errors: number;
  timeouts: number;
  non2xx: number;
  resets: number;
  '2xx': number;
  statusCodeStats: Record<string, { count: number }>;
  latency: AcHistogram;
  requests: AcHistogram & { sent: number };
};
export type AcInstance = PromiseLike<AcResult> & { stop(): void };
export const autocannon = createRequire(import.meta.url)('autocannon') as (opts: AcOptions) => AcInstance;

// ---------------------------------------------------------------- paced load
// autocannon's overallRate is a quota per connection and second: each
// connection sends its share as fast as it can when the second starts, then
// waits, so "500/s" arrives as a burst at the head of every second. A stream
// at a rate is sent here instead: request i leaves at start + i / rate, open
// loop (it does not wait for earlier answers; over `connections` in flight,
// the agent queues it). `answerMs`: from a request's planned departure to its
// answer, so a sender that fell behind its schedule shows in it.
export type PacedRequest = { method: string; path: string; headers: Record<string, string>; body?: string };
export type PacedResult = { sent: number; ok: number; non2xx: number; errors: number; seconds: number; answerMsP99: number; answerMsMax: number };

export async function pacedLoad(o: {
  baseUrl: string;
  connections: number;
  rate: number;
  seconds: number;
  request: (i: number) => PacedRequest;
}): Promise<PacedResult> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: o.connections });
  const n = Math.round(o.rate * o.seconds);
  const answered: number[] = [];
  let ok = 0;
  let non2xx = 0;
  let errors = 0;
  const answers: Promise<void>[] = [];
  const send = (i: number, at: number) =>
    new Promise<void>((resolve) => {
      const r = o.request(i);
      const req = http.request(`${o.baseUrl}${r.path}`, { method: r.method, headers: r.headers, agent }, (res) => {
        answered.push(performance.now() - at);
        if (res.statusCode !== undefined && res.statusCode >= 200 && res.statusCode < 300) ok++;
        else non2xx++;
        res.resume();
        res.on('end', resolve);
        res.on('error', () => resolve());
      });
      req.on('error', () => {
        errors++;
        resolve();
      });
      req.end(r.body);
    });
  const start = performance.now();
  let i = 0;
  await new Promise<void>((done) => {
    const tick = () => {
      const now = performance.now();
      for (let at = start + (i * 1_000) / o.rate; i < n && at <= now; at = start + (++i * 1_000) / o.rate) answers.push(send(i, at));
      if (i < n) setTimeout(tick, 1);
      else done();
    };
    tick();
  });
  await Promise.all(answers);
  const seconds = (performance.now() - start) / 1_000;
  agent.destroy();
  answered.sort((a, b) => a - b);
  const at = (q: number) => round(answered[Math.min(answered.length - 1, Math.floor(q * answered.length))] ?? 0, 1);
  return { sent: i, ok, non2xx, errors, seconds: round(seconds, 2), answerMsP99: at(0.99), answerMsMax: round(answered[answered.length - 1] ?? 0, 1) };
}

// ---------------------------------------------------------------- settings and small helpers
export const ROOT = fileURLToPath(new URL('..', import.meta.url));
/** The dated runs of every benchmark (BENCHMARKS.md keeps only the current figures: current-figures.ts). */
export const REPORT_FILE = fileURLToPath(new URL('./HISTORY.md', import.meta.url));
export const DEFAULT_PG_ADMIN_URL = 'postgresql://postgres@127.0.0.1:5432/postgres';
export const DEFAULT_REDIS_URL = 'redis://127.0.0.1:6379';
export const JSON_HEADERS = { 'content-type': 'application/json' };

export function num(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const v = Number(raw);
  if (!Number.isFinite(v) || v < 0) throw new Error(`${name} must be a non-negative number (got ${JSON.stringify(raw)})`);
  return v;
}

export function nums(name: string, fallback: number[]): number[] {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const v = raw.split(',').map((s) => Number(s.trim()));
  if (v.some((n) => !Number.isInteger(n) || n < 1)) throw new Error(`${name} must be a comma-separated list of positive integers`);
  return v;
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
export const round = (n: number, digits = 2) => Math.round(n * 10 ** digits) / 10 ** digits;
/** Thousands separated by spaces, as in the rest of BENCHMARKS.md. */
export const fmt = (v: number) => v.toLocaleString('en-US', { maximumFractionDigits: 2 }).replace(/,/g, ' ');

export type Log = (msg: string) => void;
/** Progress lines on stderr (stdout carries only the JSON document). */
export function makeLog(tag: string): Log {
  return (msg) => process.stderr.write(`[${tag} ${new Date().toISOString().slice(11, 23)}] ${msg}\n`);
}

export function withDatabase(url: string, db: string): string {
  const u = new URL(url);
  u.pathname = `/${db}`;
  return u.toString();
}

/** One query on a short-lived connection. */

export { freePort, pgQuery, postgresVersion };

// ---------------------------------------------------------------- the service
export type Service = {
  child: ChildProcess;
  baseUrl: string;
  /** JSON content type and an API key with every scope, made for the run. */
  headers: Record<string, string>;
  exited: Promise<number | null>;
};

/**
 * Starts `node --import tsx src/main.ts <role>` (default `all`, as `npm start`)
 * on 127.0.0.1:port with the given database, Redis and extra environment, and
 * waits until /readyz answers 200.
 */
export async function startService(o: {
  port: number;
  databaseUrl: string;
  redisUrl: string;
  env: Record<string, string>;
  nodeArgs?: string[];
  role?: 'all' | 'api';
  log: Log;
}): Promise<Service> {
  const generated = fileURLToPath(new URL('../src/generated/prisma/client.ts', import.meta.url));
  if (!existsSync(generated)) {
    o.log('Prisma client not generated yet: running scripts/prisma-generate.mjs');
    const r = spawnSync(process.execPath, ['scripts/prisma-generate.mjs'], { cwd: ROOT, stdio: ['ignore', 2, 2] });
    if (r.status !== 0) throw new Error('prisma generate failed');
  }
  const child = spawn(process.execPath, [...(o.nodeArgs ?? []), '--import', 'tsx', 'src/main.ts', o.role ?? 'all'], {
    cwd: ROOT,
    env: {
      ...process.env,
      DATABASE_URL: o.databaseUrl,
      REDIS_URL: o.redisUrl,
      PORT: String(o.port),
      HOST: '127.0.0.1',
      // The limiter stays in the path (one Redis call a request, as in production), above any rate measured here.
      API_RATE_LIMIT_PER_SECOND: '1000000',
      ...o.env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  let started = false;
  // The service's logs (JSON lines) go to our stderr, so stdout stays one JSON document.
  const forward = (chunk: Buffer) => {
    const text = chunk.toString();
    if (text.includes('"service started"')) started = true;
    process.stderr.write(text.replace(/^(?=.)/gm, '  [service] '));
  };
  child.stdout?.on('data', forward);
  child.stderr?.on('data', forward);
  const baseUrl = `http://127.0.0.1:${o.port}`;

  // "service started" is logged at info level, which LOG_LEVEL=warn hides; the API
  // listens only once migrations, Redis and the workers are up, so /readyz answering
  // 200 means the same thing.
  const service: Service = { child, baseUrl, headers: { ...JSON_HEADERS }, exited };
  let dead = false;
  void exited.then(() => (dead = true));
  const deadline = Date.now() + 60_000;
  try {
    while (!started) {
      if (dead) throw new Error(`the service exited during start-up (code ${child.exitCode})`);
      if (Date.now() > deadline) throw new Error('the service did not start within 60 s');
      try {
        const r = await fetch(`${baseUrl}/readyz`);
        if (r.ok) started = true;
      } catch {
        // not listening yet
      }
      if (!started) await sleep(100);
    }
    service.headers.authorization = `Bearer ${await makeKey(o.databaseUrl)}`;
  } catch (err) {
    await stopService(service, o.log);
    throw err;
  }
  return service;
}

/** An API key with every scope, in the run's database (the service has migrated it). */
async function makeKey(databaseUrl: string): Promise<string> {
  const db = createDb(databaseUrl, 1);
  try {
    return (await apiKeyStore(db).create('benchmark', SCOPES, DEFAULT_CLIENT)).key;
  } finally {
    await db.$disconnect();
  }
}

export async function stopService(s: Service, log: Log): Promise<number | null> {
  if (s.child.exitCode !== null || s.child.signalCode !== null) return s.child.exitCode;
  s.child.kill('SIGTERM');
  let timer: NodeJS.Timeout | undefined;
  const code = await Promise.race([s.exited, new Promise<'timeout'>((r) => (timer = setTimeout(() => r('timeout'), 20_000)))]);
  clearTimeout(timer);
  if (code === 'timeout') {
    log('the service did not stop within 20 s of SIGTERM: sending SIGKILL');
    s.child.kill('SIGKILL');
    return s.exited;
  }
  return code;
}

// ---------------------------------------------------------------- autocannon summary
export type Scenario = {
  name: string;
  connections: number;
  durationS: number;
  requests: number;
  requestsPerSecMean: number;
  requestsPerSecOverall: number;
  latencyMs: { p50: number; p90: number; p99: number; max: number; mean: number };
  non2xx: number;
  errors: number;
  timeouts: number;
  statusCodes: Record<string, number>;
};

export function summarise(name: string, connections: number, r: AcResult): Scenario {
  const completed = Object.values(r.statusCodeStats).reduce((a, s) => a + s.count, 0);
  return {
    name,
    connections,
    durationS: r.duration,
    requests: completed,
    requestsPerSecMean: round(r.requests.mean, 1),
    requestsPerSecOverall: round(completed / r.duration, 1),
    latencyMs: { p50: r.latency.p50, p90: r.latency.p90, p99: r.latency.p99, max: r.latency.max, mean: round(r.latency.mean) },
    non2xx: r.non2xx,
    errors: r.errors,
    timeouts: r.timeouts,
    statusCodes: Object.fromEntries(Object.entries(r.statusCodeStats).map(([k, v]) => [k, v.count])),
  };
}

// ---------------------------------------------------------------- CPU
/**
 * CPU seconds each process of a run has used so far (user + system): the
 * PostgreSQL server (postmaster and backends, ended or running) and the
 * service, from /proc, null where one is not on this machine; the Redis
 * server (INFO cpu), null without a connection; this benchmark's own process
 * (its load generator, its receivers).
 */
export type CpuMark = { postgres: number | null; service: number | null; redis: number | null; bench: number };
/** The same as µs per item of work between two marks. */
export type CpuPerItem = CpuMark;

export async function cpuMark(service: Service, dbUrl: string, redis?: Redis): Promise<CpuMark> {
  const redisCpu = redis ? await redisCpuSeconds(redis) : null;
  const own = process.cpuUsage();
  return {
    postgres: await postgresCpuSeconds(dbUrl),
    service: service.child.pid ? processCpuSeconds(service.child.pid) : null,
    redis: redisCpu,
    bench: (own.user + own.system) / 1e6,
  };
}

/** µs of CPU per item (`items` done between the two marks), rounded to 0.1. */
export function cpuPerItem(from: CpuMark, to: CpuMark, items: number): CpuPerItem {
  const per = (a: number | null, b: number | null) => (a === null || b === null || items === 0 ? null : round(((b - a) * 1e6) / items, 1));
  return {
    postgres: per(from.postgres, to.postgres),
    service: per(from.service, to.service),
    redis: per(from.redis, to.redis),
    bench: per(from.bench, to.bench) ?? 0,
  };
}

// ---------------------------------------------------------------- machine
export type Machine = { cpu: string; cores: number; memoryGiB: number; os: string; node: string; postgres: string; redis: string };

export async function redisVersion(redis: Redis): Promise<string> {
  return /redis_version:(\S+)/.exec(await redis.info('server'))?.[1] ?? 'unknown';
}

/** CPU, memory, OS and Node of this machine, with the given server versions. */
export function machineInfo(versions: { postgres: string; redis: string }): Machine {
  const cpus = os.cpus();
  return {
    cpu: cpus[0]?.model ?? 'unknown',
    cores: cpus.length,
    memoryGiB: round(os.totalmem() / 2 ** 30, 1),
    os: `${os.type()} ${os.release()} ${os.arch()}`,
    node: process.version,
    postgres: versions.postgres,
    redis: versions.redis,
  };
}

export function machineLines(m: Machine): string[] {
  return [`- Machine: ${m.cpu}, ${m.cores} cores, ${m.memoryGiB} GiB RAM, ${m.os}`, `- Node ${m.node}, ${m.postgres.split(' on ')[0]}, Redis ${m.redis}`];
}

// ---------------------------------------------------------------- bench/HISTORY.md
/**
 * Inserts `section` right below `marker`; when the marker is absent, appends
 * `heading`, the intro lines and the marker at the end of the file first.
 *
 * How the writers of bench/HISTORY.md coexist: the queue benchmark (report.ts)
 * inserts right after its own marker and keeps the rest verbatim (it writes
 * its header only into a file without the marker), so every other part lives
 * after the queue runs. Each HTTP-driven benchmark only ever inserts right after its own
 * marker (or appends its heading at the very end), so it never touches the
 * queue sections nor another benchmark's part. The file is replaced by a
 * rename, so a reader never sees half of it.
 */
export function writeMarkedSection(section: string, part: { heading: string; intro: string[]; marker: string }, file = REPORT_FILE): string {
  const old = existsSync(file) ? readFileSync(file, 'utf8') : '';
  const at = old.indexOf(part.marker);
  let text: string;
  if (at >= 0) {
    const head = old.slice(0, at + part.marker.length);
    const rest = old.slice(at + part.marker.length).replace(/^\n+/, '');
    text = `${head}\n\n${section}${rest ? `\n${rest}` : ''}`;
  } else {
    const intro = [part.heading, '', ...part.intro, '', part.marker].join('\n');
    const base = old.replace(/\n*$/, '');
    text = `${base ? `${base}\n\n` : ''}${intro}\n\n${section}`;
  }
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, text);
  renameSync(tmp, file);
  return file;
}

// ---------------------------------------------------------------- Redis keys
/** SCAN MATCH `pattern` + DEL; returns how many keys were deleted. */
export async function deleteKeysMatching(redis: Redis, pattern: string): Promise<number> {
  let cursor = '0';
  let n = 0;
  do {
    const [nextCursor, keys] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    cursor = nextCursor;
    if (keys.length) n += await redis.del(...keys);
  } while (cursor !== '0');
  return n;
}

/** The keys under `<prefix>:`. */
export function deletePrefixKeys(redis: Redis, prefix: string): Promise<number> {
  return deleteKeysMatching(redis, `${prefix}:*`);
}

// ---------------------------------------------------------------- one run
export type BenchRun = {
  readonly redis: Redis;
  readonly dbName: string;
  readonly dbUrl: string;
  /** CREATE DATABASE; dropped (WITH FORCE) by cleanup. */
  createDatabase(): Promise<void>;
  /** Starts the service on a free port against the run's database; stopped by cleanup. */
  startService(env: Record<string, string>, nodeArgs?: string[], role?: 'all' | 'api'): Promise<Service>;
  /** Stops the service started last (cleanup does it too). */
  stopService(): Promise<void>;
  /** Stops the service, drops the database (unless BENCH_KEEP_DB=1), deletes the Redis keys; runs once however often called. */
  cleanup(): Promise<void>;
};

/**
 * The resources of one run and their teardown, which always runs: at the end
 * (call cleanup() in a finally) and on SIGINT/SIGTERM (a second signal exits at once).
 */
export function openBenchRun(o: {
  connectionName: string;
  dbName: string;
  pgAdminUrl: string;
  redisUrl: string;
  /** SCAN MATCH patterns of the run's Redis keys, deleted at cleanup. */
  keyPatterns: string[];
  log: Log;
}): BenchRun {
  const { log } = o;
  const redis = new Redis(o.redisUrl, { connectionName: o.connectionName, maxRetriesPerRequest: 3, lazyConnect: true });
  const dbUrl = withDatabase(o.pgAdminUrl, o.dbName);
  let service: Service | undefined;
  let dbCreated = false;
  let interrupted = false;
  let cleaning: Promise<void> | undefined;

  const teardown = async () => {
    if (service) {
      const code = await stopService(service, log).catch((err: unknown) => (log(`stopping the service failed: ${String(err)}`), null));
      log(`service stopped (exit code ${code})`);
      service = undefined;
    }
    // BENCH_KEEP_DB=1 leaves the run's database for a look afterwards (its name is logged).
    if (dbCreated && process.env.BENCH_KEEP_DB === '1') log(`kept database ${o.dbName} (BENCH_KEEP_DB=1)`);
    else if (dbCreated) {
      await pgQuery(o.pgAdminUrl, `DROP DATABASE IF EXISTS "${o.dbName}" WITH (FORCE)`).catch((err: unknown) =>
        log(`dropping ${o.dbName} failed: ${String(err)}`),
      );
      dbCreated = false;
    }
    for (const pattern of o.keyPatterns) {
      try {
        if (redis.status === 'wait') await redis.connect();
        const n = await deleteKeysMatching(redis, pattern);
        log(`deleted ${n} Redis keys under ${pattern}`);
      } catch (err) {
        log(`deleting Redis keys under ${pattern} failed: ${String(err)}`);
      }
    }
    redis.disconnect();
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  };
  const cleanup = () => (cleaning ??= teardown());
  const onSignal = (signal: NodeJS.Signals) => {
    if (interrupted) process.exit(130);
    interrupted = true;
    log(`${signal}: cleaning up`);
    void cleanup().finally(() => process.exit(130));
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  return {
    redis,
    dbName: o.dbName,
    dbUrl,
    async createDatabase() {
      await pgQuery(o.pgAdminUrl, `CREATE DATABASE "${o.dbName}"`);
      dbCreated = true;
    },
    async startService(env, nodeArgs, role) {
      if (service) throw new Error('the service is already running');
      const port = await freePort();
      // BENCH_SERVICE_NODE_ARGS: flags for every service a benchmark starts (e.g. --cpu-prof --cpu-prof-dir=/tmp/prof).
      const flags = nodeArgs ?? (process.env.BENCH_SERVICE_NODE_ARGS ?? '').split(' ').filter(Boolean);
      service = await startService({ port, databaseUrl: dbUrl, redisUrl: o.redisUrl, env, nodeArgs: flags, role: role ?? 'all', log });
      return service;
    },
    async stopService() {
      if (!service) return;
      const s = service;
      service = undefined;
      log(`service stopped (exit code ${await stopService(s, log)})`);
    },
    cleanup,
  };
}
