// One fault-injection scenario's world: its own database, queue key prefix and
// webhook receiver (the notifier's third party), the API and N worker
// processes with short timings, the three load drivers, and at the end the
// settle-then-check step that prints the scenario's counts as one JSON line.
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freePort } from '../../src/core/free-port.js';
import { type ChildService, restartChildService, startChildService } from '../helpers/child-service.js';
import { type TestDb, createTestDb } from '../helpers/db.js';
import { type Webhook, startWebhook } from '../helpers/webhook.js';
import { type AppointmentsLoad, type Slot, driveAppointments } from './drivers/appointments.js';
import { type Http, createHttp } from './drivers/http.js';
import { type OrderRecord, type OrdersLoad, driveOrders } from './drivers/orders.js';
import { type ParcelRecord, type ParcelsLoad, driveParcels, vehicleOf } from './drivers/parcels.js';
import { checkReminders } from './invariants/appointments.js';
import { receivedIds } from './invariants/counts.js';
import { checkOrders } from './invariants/orders.js';
import { checkParcels } from './invariants/parcels.js';
import { type Evidence, type Recovery, gatherEvidence, recoveryAfter } from './evidence.js';
import { type Outcome, expectInvariants, printOutcome } from './report.js';
import { jobsInFlight, waitUntilSettled } from './settle.js';
import { dropServiceKeys, makeApiKey } from '../helpers/service.js';

const BATCH_SIZE = 5;

// Short timings so a scenario runs in tens of seconds. Whole seconds where the
// config takes no fractions (the reconcile and relay intervals and graces).
export const CHAOS_ENV: Readonly<Record<string, string>> = {
  HOST: '127.0.0.1',
  REMINDERS_PER_CONTACT_PER_HOUR: '100000', // the load books many reminders for few contacts
  DATABASE_POOL_SIZE: '5',
  WORKER_LEASE_MS: '1500', // a killed worker's jobs come back within 1.5 s
  WORKER_IDLE_RECHECK_MS: '1000',
  SHUTDOWN_GRACE_MS: '2000',
  ORDER_RECONCILE_INTERVAL_SECONDS: '2',
  ORDER_RECONCILE_GRACE_SECONDS: '1',
  APPOINTMENT_RECONCILE_INTERVAL_SECONDS: '2',
  APPOINTMENT_RECONCILE_GRACE_SECONDS: '1',
  PARCEL_BATCH_SIZE: String(BATCH_SIZE),
  PARCEL_MAX_WAIT_SECONDS: '1',
  PARCEL_RECONCILE_INTERVAL_SECONDS: '2',
  PARCEL_RECONCILE_GRACE_SECONDS: '1',
  NOTIFY_RELAY_INTERVAL_SECONDS: '2',
  NOTIFY_RETRY_DELAYS_MS: '250,500,1000',
  NOTIFY_MAX_ATTEMPTS: '50', // outlasts any outage of a scenario
  NOTIFY_TIMEOUT_MS: '700', // at most half the lease (a call must fit inside its renewed lease)
};

/** Reconciliation passes off (one pass at start, the next in an hour): what must work without them. */
export const NO_DOMAIN_RECONCILE: Readonly<Record<string, string>> = {
  ORDER_RECONCILE_INTERVAL_SECONDS: '3600',
  APPOINTMENT_RECONCILE_INTERVAL_SECONDS: '3600',
};

// About 15 s of load per scenario: order bursts paid around their deadlines,
// bookings moved and cancelled around their remind times, parcels over areas.
const ORDERS_LOAD: Omit<OrdersLoad, 'tag'> = { count: 150, burst: 10, spreadMs: 14_000, windowSeconds: [1, 2, 3], payShare: 0.75, payJitterMs: 300 };
const APPOINTMENTS_LOAD: Omit<AppointmentsLoad, 'tag'> = { count: 100, spreadMs: 12_000, leadSeconds: 5, firstRemindMs: [2_000, 4_000], changeJitterMs: 300 };
const PARCELS_LOAD: Omit<ParcelsLoad, 'tag'> = { count: 400, areas: 8, clients: 4, spreadMs: 15_000 };

// Every booking is given up within about a second of its remind time or held to
// the end; a slot held 10 s past its remind time is one the service owed a
// reminder whatever the fault (lease, restart, reconciliation delays included).
const MUST_REMIND_AFTER_MS = 10_000;
const SETTLE_TIMEOUT_MS = 60_000;
// An effect this late had its job held by a dead worker, lost or retried (normal lateness: milliseconds).
const LATE_MS = 1_000;

export type ScenarioOptions = {
  name: string;
  workers: number;
  /** Redis as the test reaches it (a direct connection, for the settle checks). */
  redisUrl: string;
  /** Redis as the service reaches it (e.g. through a proxy); default redisUrl. */
  serviceRedisUrl?: string;
  /** PostgreSQL URL of the service from the scenario database's URL (e.g. through a proxy). */
  serviceDatabaseUrl?: (url: string) => string;
  env?: Record<string, string>;
};

export type Records = { orders: OrderRecord[]; appointments: Map<string, Slot[]>; parcels: ParcelRecord[] };

export type Scenario = {
  readonly name: string;
  /** Base URL of the API process. */
  readonly url: string;
  /** An API key with every scope. */
  readonly key: string;
  readonly tdb: TestDb;
  readonly http: Http;
  readonly workers: readonly ChildService[];
  killWorker(i: number): Promise<void>;
  restartWorker(i: number): Promise<void>;
  /** Ids of the jobs leased to a worker right now (the periodic passes aside). */
  jobsInFlight(): Promise<string[]>;
  /** Every service process's output so far, the dead ones' included. */
  logs(): string;
  /**
   * Runs the three load drivers side by side and `inject` beside them (told
   * when the load is done); `onDue` hears every order deadline and remind time.
   * Waits for both, even when one fails, so no fault is still being injected
   * while the scenario is taken down.
   */
  drive<F>(inject: (loadDone: () => boolean) => Promise<F>, onDue?: (at: number) => void): Promise<{ records: Records; faults: F }>;
  /**
   * Waits for the backlog to clear, checks every invariant, prints the JSON
   * line and asserts; returns what shows the faults reached the work.
   */
  settleAndCheck(records: Records, faults: Record<string, unknown>): Promise<Evidence>;
  close(): Promise<void>;
};

export async function startScenario(o: ScenarioOptions): Promise<Scenario> {
  const started = Date.now();
  const tag = `${o.name}-${randomBytes(3).toString('hex')}`;
  const tdb = await createTestDb(`chaos_${o.name.replaceAll('-', '_')}`);
  const prefix = `c${randomBytes(4).toString('hex')}`;
  const webhook: Webhook = await startWebhook();
  const redis = new Redis(o.redisUrl, { maxRetriesPerRequest: null });
  redis.on('error', () => {}); // reconnects by itself when a scenario restarts Redis
  const port = await freePort();
  const env = {
    ...CHAOS_ENV,
    ...o.env,
    DATABASE_URL: o.serviceDatabaseUrl ? o.serviceDatabaseUrl(tdb.url) : tdb.url,
    REDIS_URL: o.serviceRedisUrl ?? o.redisUrl,
    QUEUE_PREFIX: prefix,
    NOTIFY_WEBHOOK_URL: webhook.url,
  };
  const [api, ...workers] = await Promise.all([
    startChildService('api', { ...env, PORT: String(port) }),
    ...Array.from({ length: o.workers }, () => startChildService('worker', env)),
  ]);
  const finished: string[] = [];
  let logFile: string | null = null;
  const url = `http://127.0.0.1:${port}`;
  const { key } = await makeApiKey(tdb.url);
  const http = createHttp(url, key);
  const all = () => [api as ChildService, ...workers];
  const logs = () => [...finished, ...all().map((c) => `--- ${c.role}\n${c.output()}`)].join('\n');

  return {
    name: o.name,
    url,
    key,
    tdb,
    http,
    workers,
    async killWorker(i) {
      await (workers[i] as ChildService).kill('SIGKILL');
    },
    async restartWorker(i) {
      const old = workers[i] as ChildService;
      finished.push(`--- worker ${i} (killed)\n${old.output()}`);
      workers[i] = await restartChildService(old);
    },
    jobsInFlight: () => jobsInFlight(redis, prefix),
    logs,

    async drive(inject, onDue) {
      const due = onDue ? { onDue } : {};
      let loadDone = false;
      const load = Promise.all([
        driveOrders(http, { tag, ...ORDERS_LOAD, ...due }),
        driveAppointments(http, { tag, ...APPOINTMENTS_LOAD, ...due }),
        driveParcels(http, { tag, ...PARCELS_LOAD }),
      ]).finally(() => (loadDone = true));
      const [l, f] = await Promise.allSettled([load, inject(() => loadDone)]);
      if (l.status === 'rejected') throw l.reason;
      if (f.status === 'rejected') throw f.reason;
      const [o1, a1, p1] = l.value;
      return { records: { orders: o1, appointments: a1, parcels: p1 }, faults: f.value };
    },

    async settleAndCheck(records, faults) {
      const settle = await waitUntilSettled(tdb.db, redis, prefix, SETTLE_TIMEOUT_MS);
      const received = receivedIds(webhook.calls);
      const outcome: Outcome = {
        settle,
        exited: all().flatMap((c) => {
          const how = c.ended();
          return how === null ? [] : [`${c.role} pid ${c.child.pid}: ${how}`];
        }),
        http: http.tally,
        orders: await checkOrders(tdb.db, records.orders, received),
        appointments: await checkReminders(tdb.db, records.appointments, received, MUST_REMIND_AFTER_MS),
        parcels: await checkParcels(tdb.db, records.parcels, received, { batchSize: BATCH_SIZE, vehicleOf }),
      };
      const text = logs();
      const evidence = await gatherEvidence(tdb.db, text, LATE_MS);
      const backs = (faults.backAt ?? []) as { fault: string; at: number }[];
      const recoveries: Recovery[] = await Promise.all(backs.map((b) => recoveryAfter(tdb.db, b.fault, b.at)));
      logFile = saveLogs(o.name, text);
      const operations = Object.values(http.tally.statuses).reduce((a, b) => a + b, 0) + http.tally.networkErrors;
      printOutcome(o.name, { ms: Date.now() - started, operations, faults, recoveries, evidence, logs: logFile }, outcome);
      expectInvariants(outcome, SETTLE_TIMEOUT_MS);
      return evidence;
    },

    async close() {
      await Promise.all(all().map((c) => c.kill('SIGKILL')));
      // A scenario that failed before its check still leaves its logs to read.
      if (!logFile) console.log(`${o.name}: service logs in ${saveLogs(o.name, logs())}`);
      await dropServiceKeys(prefix).catch(() => {});
      redis.disconnect();
      await webhook.close();
      await tdb.drop();
    },
  };
}

/** Writes the processes' logs beside the other temporary files; returns the path. */
function saveLogs(name: string, text: string): string {
  const dir = join(tmpdir(), 'ots-chaos');
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `${name}-${new Date().toISOString().replaceAll(':', '-')}.log`);
  writeFileSync(file, text);
  return file;
}
