// The world a model-based suite drives: the service as it runs in production
// (an API process and two worker processes, started from src/main.ts), its own
// PostgreSQL database, a private Redis persisting like production (AOF,
// fsync every second) reached through a TCP proxy, and the third party the
// notifications go to (a local webhook receiver). Every run of a suite uses
// new ids, so runs share one world and its start-up cost.
//
// The faults a command can inject, each on this world's own pieces only:
// a worker killed (SIGKILL) or stopped (SIGTERM, as a deploy does) and
// started again, the API process killed and started again (its clients
// retry), Redis hung (SIGSTOP/SIGCONT),
// Redis crashed and restarted losing its latest writes (the AOF cut back),
// every PostgreSQL connection of the service terminated, the database
// refusing every connection for 3 s (an outage: a SENT mark outlasts its
// retries), and every open Redis connection gone silent (a path that drops
// packets without a reset).
// A world started with `clocks` can also set a service host's wall clock off
// (host-clock.mjs, loaded first in each of its processes).
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../../src/core/free-port.js';
import { type RedisClient, createRedis } from '../../src/core/redis.js';
import { type Batcher, type BatcherOptions, batcherPrefix, createBatcher } from '../../src/queue/index.js';
import { type Http, createHttp } from '../chaos/drivers/http.js';
import { type ChildService, restartChildService, startChildService } from '../helpers/child-service.js';
import { type TestDb, adminQuery, createTestDb } from '../helpers/db.js';
import { sleep, waitFor } from '../helpers/redis.js';
import { type PrivateRedis, startPrivateRedis } from '../helpers/redis-server.js';
import { type TcpProxy, startTcpProxy } from '../helpers/tcp-proxy.js';
import { type Answer, type Received, type Webhook, startWebhook } from '../helpers/webhook.js';
import { makeApiKey } from '../helpers/service.js';
import { DEFAULT_CLIENT } from '../../src/core/auth/api-key-input.js';
import { SCOPES } from '../../src/core/auth/scopes.js';

/** The receiver's next answers: a kind, applied to every call until changed. */
export const RECEIVER_KINDS = ['ok', 'fail', 'slowOk', 'slowTimeout', 'slowBody', 'hang', 'reject'] as const;
export type ReceiverKind = (typeof RECEIVER_KINDS)[number];

export const FAULT_KINDS = ['killWorker', 'stopWorker', 'killApi', 'hangRedis', 'restartRedis', 'terminatePg', 'silenceRedis', 'pgOutage'] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];
/** How long the database refuses every connection in a `pgOutage`: past the ~2 s a SENT mark is retried for. */
const PG_OUTAGE_MS = 3_000;

/** Short timings, so a run's deadlines, retries and repairs take seconds. */
export const MODEL_TIMINGS = {
  WORKER_LEASE_MS: 2_000,
  NOTIFY_TIMEOUT_MS: 600,
  /** The receiver's slow answer: within the timeout, or past it (the caller gives up). */
  SLOW_OK_MS: 200,
  SLOW_TIMEOUT_MS: 900,
  RECONCILE_SECONDS: 1,
  PARCEL_BATCH_SIZE: 4,
  PARCEL_MAX_WAIT_MS: 1_500,
} as const;

/**
 * A success that went out a third of the call's timeout or more after its
 * request came (the slow receiver's answer; later only on a loaded host) may
 * reach a loaded service after its timeout fired: the service takes it for a
 * timeout and sends the notification again (same id), as at-least-once
 * delivery does (four worlds starting on two cores took a 300 ms answer to a
 * 600 ms timeout for a timeout). A success answered at once is never excused so.
 */
export const mayHaveTimedOut = (c: Received): boolean => c.answeredAt !== undefined && c.answeredAt - c.at >= MODEL_TIMINGS.NOTIFY_TIMEOUT_MS / 3;

/** The admin API's token in the world (a suite may redrive dead jobs). */
export const MODEL_ADMIN_TOKEN = 'model-suite-admin-token-0123456789';

/**
 * The clients (tenants) the world has an API key of, every scope each:
 * `http` is the first's; a suite sends some requests as another
 * (`httpAs`) to hold the rule that no effect crosses clients.
 */
export const MODEL_CLIENTS = [DEFAULT_CLIENT, 'client-b'] as const;
export type ModelClient = (typeof MODEL_CLIENTS)[number];

const ENV: Readonly<Record<string, string>> = {
  HOST: '127.0.0.1',
  ADMIN_TOKEN: MODEL_ADMIN_TOKEN,
  // The model books many reminders for few contacts; its rules do not include this limit.
  REMINDERS_PER_CONTACT_PER_HOUR: '100000',
  LOG_LEVEL: 'info',
  DATABASE_POOL_SIZE: '4',
  WORKER_LEASE_MS: String(MODEL_TIMINGS.WORKER_LEASE_MS),
  WORKER_IDLE_RECHECK_MS: '500',
  SHUTDOWN_GRACE_MS: '1000',
  REDIS_SOCKET_TIMEOUT_MS: '1500',
  ORDER_RECONCILE_INTERVAL_SECONDS: String(MODEL_TIMINGS.RECONCILE_SECONDS),
  ORDER_RECONCILE_GRACE_SECONDS: '1',
  APPOINTMENT_RECONCILE_INTERVAL_SECONDS: String(MODEL_TIMINGS.RECONCILE_SECONDS),
  APPOINTMENT_RECONCILE_GRACE_SECONDS: '1',
  PARCEL_BATCH_SIZE: String(MODEL_TIMINGS.PARCEL_BATCH_SIZE),
  PARCEL_MAX_WAIT_SECONDS: String(MODEL_TIMINGS.PARCEL_MAX_WAIT_MS / 1_000),
  PARCEL_RECONCILE_INTERVAL_SECONDS: String(MODEL_TIMINGS.RECONCILE_SECONDS),
  PARCEL_RECONCILE_GRACE_SECONDS: '1',
  NOTIFY_RELAY_INTERVAL_SECONDS: '1',
  NOTIFY_RETRY_DELAYS_MS: '100,200,400',
  NOTIFY_RETRY_JITTER: '0.2',
  NOTIFY_MAX_ATTEMPTS: '100', // outlasts any receiver outage of a run
  NOTIFY_TIMEOUT_MS: String(MODEL_TIMINGS.NOTIFY_TIMEOUT_MS),
};

/**
 * The timers' settings in a world started with `timers` (their webhook host
 * is the receiver's): short retries, and attempts that outlast any receiver
 * outage of a run unless a timer names fewer.
 */
export const MODEL_TIMERS = { MAX_ATTEMPTS: 100, RETRY_DELAYS_MS: '100,200,400', RELAY_INTERVAL_SECONDS: 1 } as const;

export type FaultSpan = { kind: FaultKind; from: number; to: number };

/** A service host whose wall clock a world started with `clocks` can set off: the API's, or a worker's by its place in the pool. */
export type Host = 'api' | number;
const HOST_CLOCK = new URL('./host-clock.mjs', import.meta.url).href;

/** What happened in a run, for its check and the suite's summary. */
export type RunLog = {
  /** Every step: client operations, waits, receiver changes and faults. */
  operations: number;
  /** Client operations only (requests to the service, an operator's included), by step name. */
  client: Record<string, number>;
  faults: Partial<Record<FaultKind, number>>;
  /** When each fault was injected and when its command returned (a killed worker restarts after that, a silenced connection is found dead later). */
  faultSpans: FaultSpan[];
  /** Each time an excuse rule accepted what a rule forbids, by the excuse's name. */
  excused: Record<string, number>;
};

export type World = {
  /** Requests as the first client (MODEL_CLIENTS[0]): the same as `httpAs(MODEL_CLIENTS[0])`. */
  readonly http: Http;
  /** Requests with an API key of `client`. */
  httpAs(client: ModelClient): Http;
  readonly db: TestDb['db'];
  readonly webhook: Webhook;
  /**
   * The service's batcher `name` (its keys under the service's QUEUE_PREFIX),
   * on a connection of the suite's own straight to Redis, not through the
   * proxy a fault may silence: for a suite to plant what the service itself
   * should not write (a stray entry in a group). Opened at the first call.
   */
  batcher(name: string, o: Pick<BatcherOptions, 'batchSize' | 'maxWaitMs'>): Batcher;
  /** A new tag for one run's ids. */
  runTag(): string;
  /** Starts a run's log. */
  startRun(): RunLog;
  receiver(kind: ReceiverKind): void;
  fault(kind: FaultKind, run: RunLog): Promise<void>;
  /** Sets `host`'s wall clock `offsetMs` off (0: right again), a restarted process's too; only in a world started with `clocks`. */
  setClock(host: Host, offsetMs: number): void;
  /** Waits until no fault is still being repaired by the world itself (a worker restarting). */
  quiesce(): Promise<void>;
  /** The service processes that ended without a fault ending them (a crash), each with how and the end of its output. */
  crashed(): string[];
  /** Every service process's output, the killed ones' included, saved to a file; returns its path. */
  saveLogs(name: string): string;
  close(): Promise<void>;
};

const receiverAnswer: Record<ReceiverKind, Answer> = {
  ok: 'ok',
  fail: 'fail',
  slowOk: { slowMs: MODEL_TIMINGS.SLOW_OK_MS, then: 'ok' },
  slowTimeout: { slowMs: MODEL_TIMINGS.SLOW_TIMEOUT_MS, then: 'ok' },
  // A success whose body outlasts the call's timeout: a success all the same.
  slowBody: { slowBodyMs: MODEL_TIMINGS.SLOW_TIMEOUT_MS },
  hang: 'hang',
  reject: 'reject',
};

export async function startWorld(name: string, workers = 2, o: { clocks?: boolean; timers?: boolean } = {}): Promise<World> {
  const tdb = await createTestDb(`model_${name}`);
  const redis: PrivateRedis = await startPrivateRedis([], { aof: true });
  const proxy: TcpProxy = await startTcpProxy({ port: redis.port });
  const webhook = await startWebhook();
  const aof = sampleAof(redis);
  const port = await freePort();
  // One file per host, read by host-clock.mjs in its process (and in the one that replaces it).
  const clockDir = o.clocks ? mkdtempSync(join(tmpdir(), 'ots-clocks-')) : null;
  const clockEnv = (host: Host): Record<string, string> =>
    clockDir ? { MODEL_CLOCK_FILE: join(clockDir, String(host)), NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --import=${HOST_CLOCK}`.trim() } : {};
  const env = {
    ...ENV,
    DATABASE_URL: tdb.url,
    REDIS_URL: `redis://127.0.0.1:${proxy.port}`,
    QUEUE_PREFIX: `m${randomBytes(3).toString('hex')}`,
    // The record groups, the default of the next release (this one writes the one HASH by default).
    QUEUE_RECORD_GROUPS: '1',
    NOTIFY_WEBHOOK_URL: webhook.url,
    ...(o.timers && {
      TIMER_WEBHOOK_HOSTS: new URL(webhook.url).host,
      TIMER_WEBHOOK_RETRY_DELAYS_MS: MODEL_TIMERS.RETRY_DELAYS_MS,
      TIMER_MAX_ATTEMPTS: String(MODEL_TIMERS.MAX_ATTEMPTS),
      TIMER_RELAY_INTERVAL_SECONDS: String(MODEL_TIMERS.RELAY_INTERVAL_SECONDS),
    }),
  };
  const started = await Promise.all([
    startChildService('api', { ...env, PORT: String(port), ...clockEnv('api') }),
    ...Array.from({ length: workers }, (_, i) => startChildService('worker', { ...env, ...clockEnv(i) })),
  ]);
  let api = started[0] as ChildService;
  const pool = started.slice(1);
  const finished: string[] = [];
  let direct: RedisClient | null = null;
  let restarting: Promise<void> = Promise.resolve();
  let runs = 0;
  const clients = new Map<ModelClient, Http>();
  for (const client of MODEL_CLIENTS) {
    const { key } = await makeApiKey(tdb.url, SCOPES, `model-${client}`, client);
    clients.set(client, createHttp(`http://127.0.0.1:${port}`, key, 60_000));
  }
  const httpAs = (client: ModelClient): Http => clients.get(client) as Http;
  const http = httpAs(MODEL_CLIENTS[0]);

  /**
   * Ends a service process, a worker (picked at random) or the API: SIGKILL,
   * or SIGTERM (a deploy: it stops claiming, its calls get the shutdown grace,
   * then it exits), and starts it again.
   */
  async function replace(role: 'worker' | 'api', signal: 'SIGKILL' | 'SIGTERM'): Promise<void> {
    await restarting;
    const i = role === 'api' ? -1 : Math.floor(Math.random() * pool.length);
    const old = (i === -1 ? api : pool[i]) as ChildService;
    if (signal === 'SIGKILL') await old.kill('SIGKILL');
    else await old.stop();
    finished.push(`--- ${role} (${signal === 'SIGKILL' ? 'killed' : 'stopped'})\n${old.output()}`);
    // Started again in the background, as an orchestrator would (again, after
    // a pause, if that start fails: a start during a database outage ends at
    // once, and three at once all fell inside one): the run goes on with the
    // other worker meanwhile. The API is back before the step ends: its
    // clients retry meanwhile, and a request retried for seconds is one a
    // step cannot judge (a move past its start).
    restarting = (async () => {
      for (let attempt = 1; ; attempt++) {
        try {
          const again = await restartChildService(old);
          if (i === -1) api = again;
          else pool[i] = again;
          return;
        } catch (err) {
          finished.push(`--- ${role} (failed start ${attempt})\n${String(err)}`);
          if (attempt >= 5) throw err;
          await sleep(attempt * 1_000);
        }
      }
    })();
    if (role === 'api') await restarting;
  }

  async function restartRedis(loseMs: number): Promise<void> {
    await redis.kill();
    const bytes = aof.sizeAt(Date.now() - loseMs);
    redis.truncateAof(bytes);
    aof.cut(bytes);
    await sleep(200);
    await redis.restart();
  }

  async function terminatePg(): Promise<void> {
    await adminQuery(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '${tdb.name}' AND pid <> pg_backend_pid()`);
  }

  async function pgOutage(): Promise<void> {
    await adminQuery(`ALTER DATABASE "${tdb.name}" ALLOW_CONNECTIONS false`);
    try {
      await terminatePg();
      await sleep(PG_OUTAGE_MS);
    } finally {
      await adminQuery(`ALTER DATABASE "${tdb.name}" ALLOW_CONNECTIONS true`);
    }
  }

  return {
    http,
    httpAs,
    db: tdb.db,
    webhook,
    batcher(name, o) {
      direct ??= createRedis(redis.url, 'model-suite');
      return createBatcher(direct, { name, prefix: batcherPrefix(env.QUEUE_PREFIX), ...o });
    },
    runTag: () => `${name}${++runs}-${randomBytes(2).toString('hex')}`,
    startRun: () => ({ operations: 0, client: {}, faults: {}, faultSpans: [], excused: {} }),
    receiver(kind) {
      webhook.setBehaviour(() => receiverAnswer[kind]);
    },
    async fault(kind, run) {
      run.faults[kind] = (run.faults[kind] ?? 0) + 1;
      const span: FaultSpan = { kind, from: Date.now(), to: Infinity };
      run.faultSpans.push(span);
      try {
        switch (kind) {
          case 'killWorker':
            return await replace('worker', 'SIGKILL');
          case 'stopWorker':
            return await replace('worker', 'SIGTERM');
          case 'killApi':
            return await replace('api', 'SIGKILL');
          case 'hangRedis':
            redis.pause();
            await sleep(2_000);
            redis.resume();
            return;
          case 'restartRedis':
            return await restartRedis(1_000);
          case 'terminatePg':
            // No repeat: a SENT mark lost with its connection is tried again,
            // then kept in the delivery job (docs/guarantees.md, "What each fault costs").
            return await terminatePg();
          case 'silenceRedis':
            proxy.silence();
            return;
          case 'pgOutage':
            return await pgOutage();
        }
      } finally {
        span.to = Date.now();
      }
    },
    setClock(host, offsetMs) {
      if (!clockDir) throw new Error('a world started without clocks');
      const file = join(clockDir, String(host));
      // Replaced whole: a reader never sees a file half written.
      writeFileSync(`${file}.next`, String(offsetMs));
      renameSync(`${file}.next`, file);
    },
    async quiesce() {
      await restarting;
      // Test connections too were cut by a terminate: the first query may fail.
      await waitFor(
        async () => {
          try {
            await tdb.db.$queryRaw`SELECT 1`;
            return true;
          } catch {
            return false;
          }
        },
        10_000,
        100,
      );
      // A connection silenced by the last run and idle since is found dead
      // only at its next command: readiness pings Redis through the API's, so
      // a run does not start with the last run's fault still in the service
      // (appointments soak seed 307606476: the API's silent connection found
      // by the next run's first booking, its reminder written by the pass).
      await waitFor(
        () =>
          fetch(`http://127.0.0.1:${port}/readyz`)
            .then((r) => r.status === 200)
            .catch(() => false),
        15_000,
        100,
      );
    },
    crashed() {
      return [api, ...pool].flatMap((c) => {
        const how = c?.ended();
        return c && how ? [`${c.role} process ended (${how}); its last output:\n${c.output().split('\n').slice(-12).join('\n')}`] : [];
      });
    },
    saveLogs(file) {
      const dir = join(tmpdir(), 'ots-model');
      mkdirSync(dir, { recursive: true });
      const path = join(dir, `${file}-${new Date().toISOString().replaceAll(':', '-')}.log`);
      writeFileSync(path, [...finished, ...[api, ...pool].map((c) => `--- ${c?.role}\n${c?.output()}`)].join('\n'));
      return path;
    },
    async close() {
      aof.stop();
      await restarting.catch(() => {});
      await Promise.all([api, ...pool].map((c) => c?.kill('SIGKILL')));
      await webhook.close();
      await proxy.close();
      direct?.disconnect();
      await redis.stop();
      await tdb.drop();
      if (clockDir) rmSync(clockDir, { recursive: true, force: true });
    },
  };
}

/** The AOF's size every 50 ms, to know what it was a while before a crash. */
function sampleAof(redis: PrivateRedis): { sizeAt(t: number): number; cut(bytes: number): void; stop(): void } {
  const samples: { t: number; bytes: number }[] = [];
  const timer = setInterval(() => {
    if (!redis.running()) return;
    try {
      samples.push({ t: Date.now(), bytes: redis.aofBytes() });
      if (samples.length > 2_000) samples.splice(0, 1_000);
    } catch {
      // The AOF is being rewritten or the server restarts: the next sample will do.
    }
  }, 50);
  timer.unref();
  return {
    sizeAt: (t) => samples.filter((x) => x.t <= t).at(-1)?.bytes ?? 0,
    // The bytes past a cut are gone, and new writes take their place: an older
    // sample above the cut would extend the file with zeros at the next crash
    // (two crashes within a second), an AOF Redis refuses to load.
    cut(bytes) {
      for (const x of samples) x.bytes = Math.min(x.bytes, bytes);
    },
    stop: () => clearInterval(timer),
  };
}
