// The periodic passes with a year of history behind them: a fresh database
// (the service's migrations) loaded with BENCH_HISTORY_APPOINTMENTS past
// appointments (BOOKED, each with its SENT reminder), a day of bookings ahead
// inside their lead (all but 50 reminded already), and BENCH_HISTORY_ORDERS
// orders over the last 365 days (two in three paid, the rest cancelled with
// their SENT notice, one item each). Then, each BENCH_HISTORY_RUNS times
// through the real repositories: the appointments pass (listUnreminded), the
// orders pass (cancelOverdue, listUnpaid), the notifications relay's page
// (listUnsettled), the daily report of a day a month back; and last the
// retention pass (RETENTION_DAYS=30) deleting the older part in batches of
// 1 000. BENCH_HISTORY_NOTIFICATIONS tops the notifications up to that many
// with parcel batches' SENT notices over the same year (a batch row each, no
// parcels). The API with the history: the service as `npm start` runs it
// (API, workers and their passes in one process) on the loaded database and
// another on an empty one, both up, in alternating rounds: POST /orders, GET
// /orders/:id, POST /appointments and GET /notifications?orderId=, each at
// 50 connections. Issue 15's targets: each pass <= 50 ms, API p99 within 20 %
// of the empty database's and the daily report <= 10 s with 10 000 000
// orders, 5 000 000 appointments, 20 000 000 notifications.
//
// Run: `npm run bench:history` (PostgreSQL at BENCH_PG_URL, trust auth; Redis
// at REDIS_URL for the API part, its own key prefix, deleted afterwards).
// Knobs: BENCH_HISTORY_APPOINTMENTS=1000000, BENCH_HISTORY_ORDERS=2000000, BENCH_HISTORY_NOTIFICATIONS=0 (no top-up),
// BENCH_HISTORY_AHEAD=14000, BENCH_HISTORY_RUNS=20, BENCH_HISTORY_PURGE_BATCHES=20, BENCH_HISTORY_API_S=8 (seconds
// per API scenario; 0 skips the API part), BENCH_WRITE=0, BENCH_HISTORY_KEEP=1 (keep the loaded database),
// BENCH_HISTORY_DB=<name> (measure a database kept by an earlier run instead of loading one; the sizes are read from it).
// The issue's sizes: BENCH_HISTORY_ORDERS=10000000 BENCH_HISTORY_APPOINTMENTS=5000000 BENCH_HISTORY_NOTIFICATIONS=20000000
// (about 40 minutes of loading here).
// Prints JSON on stdout; writes a section into bench/HISTORY.md unless BENCH_WRITE=0.
import { randomBytes } from 'node:crypto';
import { createDb } from '../src/core/db.js';
import { dedupeKeySql } from '../src/core/delivery/index.js';
import { Prisma } from '../src/generated/prisma/client.js';
import { createLogger } from '../src/core/logger.js';
import { migrate } from '../src/core/migrate.js';
import type { PurgeBatch, PurgeCursor } from '../src/core/retention.js';
import { createAppointmentsRepository } from '../src/modules/appointments/appointments.repository.js';
import { createNotificationsRepository } from '../src/modules/notifications/notifications.repository.js';
import { createOrdersRepository } from '../src/modules/orders/orders.repository.js';
import { createReportsRepository, reportLookbackDays } from '../src/modules/reports/reports.repository.js';
import {
  type AcRequest,
  autocannon,
  DEFAULT_PG_ADMIN_URL,
  DEFAULT_REDIS_URL,
  deletePrefixKeys,
  fmt,
  freePort,
  machineInfo,
  machineLines,
  makeLog,
  num,
  postgresVersion,
  round,
  type Scenario,
  type Service,
  sleep,
  startService,
  stopService,
  summarise,
  withDatabase,
  writeMarkedSection,
} from './http-harness.js';
import { Redis } from 'ioredis';
import { percentiles, timed } from './bench-util.js';
import { pgQuery } from './pg-util.js';

const cfg = {
  appointments: Math.floor(num('BENCH_HISTORY_APPOINTMENTS', 1_000_000)),
  orders: Math.floor(num('BENCH_HISTORY_ORDERS', 2_000_000)),
  /** Notifications in all: those of the appointments and orders, topped up with parcel batches' notices. */
  notifications: Math.floor(num('BENCH_HISTORY_NOTIFICATIONS', 0)),
  apiSeconds: num('BENCH_HISTORY_API_S', 8),
  /** A database kept by an earlier run (BENCH_HISTORY_KEEP=1), measured without loading. */
  reuse: process.env.BENCH_HISTORY_DB,
  purgeBatches: Math.max(1, Math.floor(num('BENCH_HISTORY_PURGE_BATCHES', 20))),
  runs: Math.max(1, Math.floor(num('BENCH_HISTORY_RUNS', 20))),
  /** Booked appointments ahead (the next 23 h), every one inside its 24 h lead; all but 50 reminded already. */
  ahead: Math.floor(num('BENCH_HISTORY_AHEAD', 14_000)),
  write: process.env.BENCH_WRITE !== '0',
  /** Keep the loaded database (its name is logged) to look at plans afterwards. */
  keep: process.env.BENCH_HISTORY_KEEP === '1',
  pgAdminUrl: process.env.BENCH_PG_URL ?? DEFAULT_PG_ADMIN_URL,
  redisUrl: process.env.REDIS_URL ?? DEFAULT_REDIS_URL,
};
const API_CONNECTIONS = 50;
/** Rounds of each request kind on each database (the median round's p99 compared). */
const API_ROUNDS = 3;
/** API p99 with the history against the empty database's: within 20 %. */
const API_RATIO_TARGET = 1.2;
const TARGET_MS = 50;
const log = makeLog('bench:history');
const runTag = randomBytes(4).toString('hex');
const dbName = cfg.reuse ?? `ots_bench_history_${runTag}`;
const dbUrl = withDatabase(cfg.pgAdminUrl, dbName);

/** The text of a fragment over columns only (no parameters), for the plain pg queries of this load. */
function columnsSql(fragment: Prisma.Sql): string {
  if (fragment.values.length > 0) throw new Error('a fragment over columns only was expected');
  return fragment.sql;
}

/** Writes a SENT reminder, keyed as the service keys it, for each appointment `from` names (as `a`). */
function remindSent(from: string): Promise<unknown> {
  return pgQuery(
    dbUrl,
    `INSERT INTO notifications (id, kind, dedupe_key, appointment_id, channel, recipient, payload, status, attempts, sent_at)
     SELECT gen_random_uuid(), 'APPOINTMENT_REMINDER', ${columnsSql(dedupeKeySql.appointmentReminder(Prisma.raw('a.id'), Prisma.raw('a.starts_at')))},
            a.id, 'EMAIL', a.contact, '{}', 'SENT', 1, a.remind_at
       FROM ${from}`,
  );
}

/** Past appointments over the last days, each with its SENT reminder; `upcoming` ahead inside their lead, all but 50 reminded. */
async function load(upcoming: number): Promise<void> {
  const days = Math.max(1, Math.ceil(cfg.appointments / 15_000));
  await pgQuery(
    dbUrl,
    `INSERT INTO appointments (id, customer_id, contact, channel, status, starts_at, remind_before_seconds, remind_at, created_at, updated_at)
     SELECT gen_random_uuid(), 'hist', 'h@example.com', 'EMAIL', 'BOOKED', s, 3600, s - interval '1 hour', s - interval '2 days', s - interval '2 days'
       FROM (SELECT now() - interval '1 hour' - (g::double precision / $1) * make_interval(days => $2) AS s FROM generate_series(1, $1) g) t`,
    [cfg.appointments, days],
  );
  await remindSent('appointments a');
  // Ahead: a day of bookings with the default lead (24 h), so every one is
  // inside its lead window; all but the last 50 (by start) already have their reminder
  // (the steady state: what the pass reads every time, to find the 50).
  await pgQuery(
    dbUrl,
    `INSERT INTO appointments (id, customer_id, contact, channel, status, starts_at, remind_before_seconds, remind_at)
     SELECT gen_random_uuid(), 'ahead', 'a@example.com', 'EMAIL', 'BOOKED', s, 86400, now() - interval '1 hour'
       FROM (SELECT now() + (g::double precision / $1) * interval '23 hours' AS s FROM generate_series(1, $1) g) t`,
    [upcoming],
  );
  // The 50 not reminded start last: still ahead however long the rest of the load takes.
  await remindSent(`appointments a WHERE a.customer_id = 'ahead' ORDER BY a.starts_at LIMIT ${Math.max(0, upcoming - 50)}`);
  // Marked as the statement writing a reminder marks its appointment.
  await pgQuery(
    dbUrl,
    `UPDATE appointments a SET reminded = true
      WHERE EXISTS (SELECT 1 FROM notifications n WHERE n.dedupe_key = ${columnsSql(dedupeKeySql.appointmentReminder(Prisma.raw('a.id'), Prisma.raw('a.starts_at')))})`,
  );
  // A year of orders: two in three paid 5 minutes in, the rest cancelled at
  // their 30-minute deadline with their notice SENT; one item each.
  await pgQuery(
    dbUrl,
    `INSERT INTO orders (id, customer_id, status, currency, total_cents, created_at, expires_at, paid_at, cancelled_at, cancel_reason)
     SELECT gen_random_uuid(), 'hist', (CASE WHEN g % 3 = 0 THEN 'CANCELLED' ELSE 'PAID' END)::"OrderStatus", 'EUR', 1000, t, t + interval '30 minutes',
            CASE WHEN g % 3 <> 0 THEN t + interval '5 minutes' END, CASE WHEN g % 3 = 0 THEN t + interval '30 minutes' END,
            CASE WHEN g % 3 = 0 THEN 'PAYMENT_TIMEOUT'::"CancelReason" END
       FROM (SELECT g, now() - interval '1 hour' - (g::double precision / $1) * interval '365 days' AS t FROM generate_series(1, $1) g) s`,
    [cfg.orders],
  );
  await pgQuery(dbUrl, `INSERT INTO order_items (order_id, position, sku, quantity, unit_price_cents) SELECT id, 0, 'sku', 1, 1000 FROM orders`);
  await pgQuery(
    dbUrl,
    `INSERT INTO notifications (id, kind, dedupe_key, order_id, payload, status, attempts, created_at, sending_at, sent_at)
     SELECT gen_random_uuid(), 'ORDER_CANCELLED', ${columnsSql(dedupeKeySql.orderCancelled(Prisma.raw('o.id::text')))}, o.id, '{}', 'SENT', 1,
            o.cancelled_at, o.cancelled_at, o.cancelled_at + interval '50 milliseconds'
       FROM orders o WHERE o.status = 'CANCELLED'`,
  );
  // Parcel batches over the same year, each with its SENT notice, up to the notifications asked for.
  const have = (await pgQuery<{ n: number }>(dbUrl, 'SELECT count(*)::int AS n FROM notifications'))[0]?.n ?? 0;
  const batches = Math.max(0, cfg.notifications - have);
  if (batches > 0) {
    await pgQuery(dbUrl, `INSERT INTO areas (code, vehicle_plate, sorter_contact) VALUES ('hist', 'HIST-1', 'sorter@example.com')`);
    await pgQuery(
      dbUrl,
      `INSERT INTO batches (id, area_code, vehicle_plate, reason, parcel_count, created_at)
       SELECT gen_random_uuid(), 'hist', 'HIST-1', (CASE WHEN g % 4 = 0 THEN 'TIMEOUT' ELSE 'FULL' END)::"BatchReason", 10,
              now() - interval '1 hour' - (g::double precision / $1) * interval '365 days'
         FROM generate_series(1, $1) g`,
      [batches],
    );
    await pgQuery(
      dbUrl,
      `INSERT INTO notifications (id, kind, dedupe_key, batch_id, payload, status, attempts, created_at, sending_at, sent_at)
       SELECT gen_random_uuid(), 'BATCH_DISPATCHED', ${columnsSql(dedupeKeySql.batchDispatched(Prisma.raw('b.id::text')))}, b.id, '{}', 'SENT', 1,
              b.created_at, b.created_at, b.created_at + interval '50 milliseconds'
         FROM batches b`,
    );
  }
  for (const t of ['appointments', 'notifications', 'orders', 'order_items', 'batches']) await pgQuery(dbUrl, `VACUUM ANALYZE ${t}`);
}

/** What the loaded (or reused) database holds. */
async function sizes(): Promise<Record<'orders' | 'appointments' | 'notifications' | 'batches', number>> {
  const [r] = await pgQuery<{ orders: number; appointments: number; notifications: number; batches: number }>(
    dbUrl,
    `SELECT (SELECT count(*) FROM orders)::int AS orders, (SELECT count(*) FROM appointments)::int AS appointments,
            (SELECT count(*) FROM notifications)::int AS notifications, (SELECT count(*) FROM batches)::int AS batches`,
  );
  return r!;
}

type ApiFigure = Pick<Scenario, 'requests' | 'requestsPerSecOverall' | 'latencyMs' | 'non2xx' | 'errors'>;
/** One request kind on both databases: each round's figures, and the median round's p99 of each. */
type ApiComparison = { name: string; empty: ApiFigure[]; history: ApiFigure[]; emptyP99: number; historyP99: number; p99Ratio: number };

/** A service as `npm start` runs it (API, workers, periodic passes) on one database, with what its read scenarios ask for. */
type Side = { label: 'empty' | 'history'; url: string; service: Service; prefix: string; ids: string[] };

const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor((xs.length - 1) / 2)] as number;

/**
 * The API on the empty database against the history: both services running
 * at once, each request kind for cfg.apiSeconds at 50 connections on one and
 * then the other, in API_ROUNDS rounds whose order alternates (so neither
 * side is always the one measured first, on caches the other warmed). The
 * reads ask for orders the database holds (the history's, or those the
 * creates made). The median round's p99 of each side is compared.
 */
async function apiComparison(emptyUrl: string): Promise<ApiComparison[]> {
  const sides: Side[] = [];
  const redis = new Redis(cfg.redisUrl, { maxRetriesPerRequest: 3 });
  try {
    for (const [label, url] of [
      ['empty', emptyUrl],
      ['history', dbUrl],
    ] as const) {
      const prefix = `bench_history_${runTag}_${label}`;
      const service = await startService({
        port: await freePort(),
        databaseUrl: url,
        redisUrl: cfg.redisUrl,
        env: { LOG_LEVEL: 'warn', QUEUE_PREFIX: prefix, ORDER_PAYMENT_TIMEOUT_SECONDS: '3600' },
        log,
      });
      sides.push({ label, url, service, prefix, ids: [] });
    }
    const run = async (side: Side, name: string, request: (side: Side) => AcRequest, seconds = cfg.apiSeconds): Promise<ApiFigure> => {
      await sleep(500);
      const r = summarise(
        name,
        API_CONNECTIONS,
        await autocannon({ url: side.service.baseUrl, connections: API_CONNECTIONS, duration: seconds, requests: [request(side)] }),
      );
      log(`${side.label}: ${name}: ${r.requestsPerSecOverall}/s, p50 ${r.latencyMs.p50} ms, p99 ${r.latencyMs.p99} ms, non-2xx ${r.non2xx}`);
      const { requests, requestsPerSecOverall, latencyMs, non2xx, errors } = r;
      return { requests, requestsPerSecOverall, latencyMs, non2xx, errors };
    };
    const anOrder = (side: Side) => {
      let k = 0;
      return () => side.ids[k++ % side.ids.length] as string;
    };
    let n = 0;
    const inTwoDays = Date.now() + 2 * 86_400_000;
    const kinds: { name: string; request: (side: Side) => AcRequest }[] = [
      { name: 'POST /orders', request: (side) => ({ method: 'POST', path: '/orders', headers: side.service.headers, body: ORDER_BODY }) },
      {
        name: 'GET /orders/:id',
        request: (side) => {
          const next = anOrder(side);
          return { method: 'GET', path: '/orders', headers: side.service.headers, setupRequest: (req) => ({ ...req, path: `/orders/${next()}` }) };
        },
      },
      {
        name: 'POST /appointments',
        request: (side) => ({
          method: 'POST',
          path: '/appointments',
          headers: side.service.headers,
          setupRequest: (req) => ({
            ...req,
            body: JSON.stringify({
              customerId: 'api',
              contact: `api${n}@example.com`,
              channel: 'email',
              startsAt: new Date(inTwoDays + n++ * 1_000).toISOString(),
              remindBeforeSeconds: 3_600,
            }),
          }),
        }),
      },
      {
        name: 'GET /notifications?orderId=',
        request: (side) => {
          const next = anOrder(side);
          return {
            method: 'GET',
            path: '/notifications',
            headers: side.service.headers,
            setupRequest: (req) => ({ ...req, path: `/notifications?orderId=${next()}` }),
          };
        },
      },
    ];
    for (const side of sides) await run(side, 'warm-up', kinds[0]!.request, 2);
    const out: ApiComparison[] = [];
    for (const kind of kinds) {
      const figures: Record<Side['label'], ApiFigure[]> = { empty: [], history: [] };
      for (let round = 0; round < API_ROUNDS; round++) {
        for (const side of round % 2 === 0 ? sides : [...sides].reverse()) figures[side.label].push(await run(side, kind.name, kind.request));
      }
      // The reads after the creates: the empty database's orders are those they made.
      if (kind.name === 'POST /orders') {
        for (const side of sides) side.ids = (await pgQuery<{ id: string }>(side.url, 'SELECT id FROM orders ORDER BY random() LIMIT 10000')).map((r) => r.id);
      }
      const emptyP99 = median(figures.empty.map((f) => f.latencyMs.p99));
      const historyP99 = median(figures.history.map((f) => f.latencyMs.p99));
      out.push({ name: kind.name, ...figures, emptyP99, historyP99, p99Ratio: round(historyP99 / emptyP99) });
    }
    return out;
  } finally {
    for (const side of sides) {
      await stopService(side.service, log);
      await deletePrefixKeys(redis, side.prefix);
    }
    redis.disconnect();
  }
}

const ORDER_BODY = JSON.stringify({ customerId: 'api', currency: 'EUR', items: [{ sku: 'SKU-1', quantity: 1, unitPriceCents: 1_000 }] });

async function main(): Promise<void> {
  const date = new Date().toISOString();
  if (!cfg.reuse) await pgQuery(cfg.pgAdminUrl, `CREATE DATABASE "${dbName}"`);
  const db = createDb(dbUrl, 2);
  try {
    if (!cfg.reuse) {
      await migrate(dbUrl, createLogger('warn'));
      const t0 = performance.now();
      await load(cfg.ahead);
      log(`loaded the history in ${round((performance.now() - t0) / 1_000, 1)} s`);
    }
    const held = await sizes();
    log(`history: ${JSON.stringify(held)}`);
    const repo = createAppointmentsRepository(db);
    // As the pass calls it by default: grace 30 s, appointments started up to 300 s ago, horizon two intervals of 60 s, a page of 1 000.
    let rows = 0;
    const pass = await timed(cfg.runs, async () => {
      rows = (await repo.listUnreminded({ graceSeconds: 30, afterStartSeconds: 300, horizonMs: 120_000 }, null, 1_000)).length;
    });
    const orders = createOrdersRepository(db);
    const ordersPass = await timed(cfg.runs, async () => {
      await orders.cancelOverdue(30, 500);
      await orders.listUnpaid(new Date(Date.now() + 120_000), null, 1_000);
    });
    const relay = await timed(cfg.runs, () => createNotificationsRepository(db).listUnsettled(5, 30, null, 1_000));
    const reports = createReportsRepository(db, reportLookbackDays(7));
    const monthAgo = new Date(Date.now() - 30 * 86_400_000).toISOString().slice(0, 10);
    const report = await timed(Math.min(cfg.runs, 5), () => reports.generate(monthAgo, 'UTC'));
    const figures = (await reports.generate(monthAgo, 'UTC')).figures;
    // Retention at 30 days: most of the history is older.
    const cutoff = 30 * 86_400;
    // Batches in a row as the pass makes them (each after the last one's cursor), without its rests.
    const purge = async (what: string, f: (after: PurgeCursor | null) => Promise<PurgeBatch>) => {
      const ms: number[] = [];
      let deleted = 0;
      let examined = 0;
      let after: PurgeCursor | null = null;
      for (let i = 0; i < cfg.purgeBatches; i++) {
        const s = performance.now();
        const b = await f(after);
        ms.push(performance.now() - s);
        deleted += b.deleted;
        examined += b.examined;
        after = b.next;
        if (!after) break;
      }
      const total = ms.reduce((a, b) => a + b, 0);
      const p = percentiles(ms);
      return {
        what,
        batches: ms.length,
        examined,
        deleted,
        p50Ms: p?.p50 ?? 0,
        maxMs: p?.max ?? 0,
        rowsPerSecond: Math.round((deleted / total) * 1_000),
      };
    };
    // The API with the history against an empty database, before retention deletes any of the history.
    let api: ApiComparison[] = [];
    if (cfg.apiSeconds > 0) {
      const empty = `ots_bench_history_${runTag}_empty`;
      await pgQuery(cfg.pgAdminUrl, `CREATE DATABASE "${empty}"`);
      try {
        api = await apiComparison(withDatabase(cfg.pgAdminUrl, empty));
      } finally {
        await pgQuery(cfg.pgAdminUrl, `DROP DATABASE IF EXISTS "${empty}" WITH (FORCE)`);
      }
    }
    const retention = [
      await purge('orders', (after) => orders.retention[0].purge(cutoff, 1_000, after)),
      await purge('booked appointments (their reminders written at load time, inside the cutoff: none may go)', (after) =>
        repo.retention[0].purge(cutoff, 1_000, after),
      ),
    ];
    const result = {
      benchmark: 'history',
      date,
      settings: cfg,
      history: held,
      machine: machineInfo({ postgres: await postgresVersion(cfg.pgAdminUrl), redis: 'not used' }),
      pass: { rows, ...pass, targetMs: TARGET_MS },
      ordersPass,
      relay,
      report: { day: monthAgo, ...report, figures, targetMs: 10_000 },
      api,
      retention,
    };
    process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
    if (cfg.write) {
      const section = [
        `## ${date}`,
        '',
        ...machineLines(result.machine),
        '',
        `History: ${fmt(held.appointments)} appointments (${fmt(cfg.ahead)} of them ahead inside their lead, 50 of those not reminded; the rest past, each with its SENT reminder); ${fmt(held.orders)} orders over 365 days (a third cancelled, with their SENT notice); ${fmt(held.batches)} parcel batches with their SENT notice; ${fmt(held.notifications)} notifications in all.`,
        '',
        '| Pass | p50 / max | Target |',
        '|---|---|---|',
        `| Appointments (listUnreminded, one page; ${rows} rows) | ${result.pass.p50Ms} / ${result.pass.maxMs} ms over ${cfg.runs} runs | ≤ ${TARGET_MS} ms |`,
        `| Orders (cancelOverdue + listUnpaid) | ${ordersPass.p50Ms} / ${ordersPass.maxMs} ms | ≤ ${TARGET_MS} ms |`,
        `| Notifications relay (listUnsettled, one page) | ${relay.p50Ms} / ${relay.maxMs} ms | ≤ ${TARGET_MS} ms |`,
        `| Daily report of ${monthAgo} (${figures.orders.created} orders created that day) | ${report.p50Ms} / ${report.maxMs} ms | ≤ 10 000 ms |`,
        ...retention.map(
          (r) =>
            `| Retention (30 days), ${r.what}: ${r.batches} batches of 1 000, ${fmt(r.examined)} read, ${fmt(r.deleted)} deleted, ${fmt(r.rowsPerSecond)} a second | ${r.p50Ms} / ${r.maxMs} ms a batch | |`,
        ),
        '',
        ...(api.length
          ? [
              `The API (\`npm start\`'s process: API, workers and passes) at ${API_CONNECTIONS} connections, on an empty database and on the history (both services up, ${API_ROUNDS} rounds of ${cfg.apiSeconds} s each, alternating which goes first); p99 of the median round:`,
              '',
              '| Request | Empty: p99 of each round (ms) | History: p99 of each round (ms) | Requests a second, empty / history (first round) | p99 history / empty | Target | Met |',
              '|---|---|---|---|---|---|---|',
              ...api.map((a) => {
                const p99s = (xs: ApiFigure[]) => xs.map((x) => x.latencyMs.p99).join(', ');
                const non2xx = [...a.empty, ...a.history].reduce((t, x) => t + x.non2xx + x.errors, 0);
                return `| ${a.name}${non2xx ? ` (${non2xx} non-2xx or errors)` : ''} | ${p99s(a.empty)} | ${p99s(a.history)} | ${fmt(a.empty[0]?.requestsPerSecOverall ?? 0)} / ${fmt(a.history[0]?.requestsPerSecOverall ?? 0)} | ${a.p99Ratio} | ≤ ${API_RATIO_TARGET} | ${a.p99Ratio <= API_RATIO_TARGET ? 'yes' : 'no'} |`;
              }),
              '',
            ]
          : []),
      ].join('\n');
      const intro = ['How to run: `npm run bench:history` (PostgreSQL at `BENCH_PG_URL`); knobs at the top of `bench/history.bench.ts`.'];
      log(`wrote ${writeMarkedSection(section, { heading: '# History benchmark', intro, marker: '<!-- history runs: newest first -->' })}`);
    }
  } finally {
    await db.$disconnect();
    if (cfg.keep) log(`kept database ${dbName}`);
    else await pgQuery(cfg.pgAdminUrl, `DROP DATABASE IF EXISTS "${dbName}" WITH (FORCE)`);
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`bench:history failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
