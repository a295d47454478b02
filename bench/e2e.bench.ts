// End-to-end benchmark of the business effect: orders the service cancels
// itself, with API and workers in one process as `npm start` runs them, on a
// fresh database of the local PostgreSQL and a queue prefix of its own on the
// local Redis. Prints one JSON document on stdout and inserts a section into
// bench/HISTORY.md under "# End-to-end benchmark".
//
// Scenarios (issue 15's figures):
// - expiry stream: orders created through POST /orders at BENCH_E2E_RATE a
//   second for BENCH_E2E_SECONDS, paced evenly (pacedLoad: not autocannon's
//   rate, which sends each second's share in a burst at its head), each
//   expiring a fixed payment window after its creation, the window longer
//   than the creation, so the expiries fall
//   due at the rate the creation reached and on a service doing nothing else.
//   Lateness = cancelled_at - expires_at, both on the database's clock.
//   With payment reminders on (BENCH_E2E_PAYMENT_REMINDER_S, the default), each
//   order is also reminded that many seconds before its deadline, delivered to
//   a local receiver: the reminders written and delivered a second (first to
//   last) and their lateness after payment_remind_at are in `stream.paymentReminders`.
//   The CPU each order cost, all told (`stream.cpuUsPerOrder`), says where the
//   rate two cores can carry ends.
// - overdue drain: BENCH_E2E_OVERDUE orders created through an API-only
//   process (their expiry jobs written, no worker running) with a 1 s payment
//   window, as after an outage of the workers; then the service starts: the
//   cancellations a second, from the first to the last on the database's
//   clock (its workers and its reconciliation pass both work them off).
// - reminder stream and reminder drain: the same two for reminders, booked
//   through POST /appointments (each booking its own contact, a 60 s lead),
//   written by the service at their remind times and delivered to a local
//   receiver (a real HTTP server in this process answering 204). Lateness =
//   the reminder's created_at (written) and sent_at (delivered) - remind_at;
//   the drain counts both a second, first to last, and the CPU each reminder
//   cost (µs of PostgreSQL, the service, Redis, and this process with its
//   receiver), which says how far two cores can take it and where to cut.
//
// Run: `npm run bench:e2e` (`npm run --silent bench:e2e > out.json` keeps
// npm's banner out of the JSON). Knobs (environment):
//   BENCH_E2E_RATE=2000        orders a second asked of the stream
//   BENCH_E2E_SECONDS=60       length of the stream
//   BENCH_E2E_OVERDUE=100000   orders of the drain, and appointments of the reminder drain
//   BENCH_E2E_SCENARIOS=stream,drain,reminders,reminderDrain  which scenarios run
//   BENCH_E2E_CONNECTIONS=50   connections of the load generator
//   BENCH_E2E_PAYMENT_REMINDER_S=5  the stream's PAYMENT_REMINDER_BEFORE_SECONDS (0: no payment reminders)
//   BENCH_E2E_NOTICES_TO_RECEIVER=0 1: the stream's cancel notices go to the local receiver with reminders off
//                              too (they do with reminders on; otherwise to the log), to tell the two costs apart
//   BENCH_WRITE=0              do not touch bench/HISTORY.md
//   BENCH_KEEP_DB=1            keep the run's database (its name is logged) for a look afterwards
//   BENCH_PG_URL, REDIS_URL, BENCH_DB_POOL, BENCH_SERVICE_LOG_LEVEL as in bench:http
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  autocannon,
  cpuMark,
  type CpuPerItem,
  cpuPerItem,
  DEFAULT_PG_ADMIN_URL,
  DEFAULT_REDIS_URL,
  fmt,
  type Machine,
  machineInfo,
  machineLines,
  makeLog,
  num,
  openBenchRun,
  pacedLoad,
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
  paymentReminderS: Math.floor(num('BENCH_E2E_PAYMENT_REMINDER_S', 5)),
  /** The stream's cancel notices to the local receiver, not the log, with payment reminders off too (on with them: one endpoint for both). */
  noticesToReceiver: num('BENCH_E2E_NOTICES_TO_RECEIVER', 0) === 1,
  dbPool: Math.max(1, Math.floor(num('BENCH_DB_POOL', 10))),
  /** Which scenarios run (a profile of one needs the other left out). */
  scenarios: (process.env.BENCH_E2E_SCENARIOS ?? 'stream,drain,reminders,reminderDrain').split(',').map((x) => x.trim()),
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
/** The stream's payment reminders: written and delivered (SENT), a second from first to last, and late after their time. */
type PaymentReminders = {
  leadS: number;
  written: number;
  writtenPerSec: number;
  delivered: number;
  deliveredPerSec: number;
  writtenLatenessMs: Lateness | null;
  deliveredLatenessMs: Lateness | null;
};
type Stream = {
  asked: number;
  created: number;
  createdPerSec: number;
  non2xx: number;
  windowS: number;
  cancelled: number;
  latenessMs: Lateness | null;
  paymentReminders: PaymentReminders | null;
  /** CPU per order created, from the service's start to the last expiry (and the last reminder delivered), µs (the load generator's and the receiver's are the bench's). */
  cpuUsPerOrder: CpuPerItem;
};
type Drain = { orders: number; created: number; cancelled: number; seconds: number; perSec: number };

/** Percentiles (the database's) of the lateness in ms each row of `msQuery` (a SELECT of an `ms` column) gives; null for none. */
async function lateness(msQuery: string, params: unknown[]): Promise<Lateness | null> {
  const [l] = await pgQuery<Lateness>(
    dbUrl,
    `SELECT count(*)::int AS count,
            percentile_disc(0.5) WITHIN GROUP (ORDER BY ms) AS p50,
            percentile_disc(0.99) WITHIN GROUP (ORDER BY ms) AS p99,
            max(ms) AS max, round(avg(ms)::numeric, 2)::float8 AS mean
       FROM (${msQuery}) t`,
    params,
  );
  return l && l.count > 0 ? { count: l.count, p50: round(l.p50, 1), p99: round(l.p99, 1), max: round(l.max, 1), mean: l.mean } : null;
}

const count = async (where: string, params: unknown[] = []) =>
  (await pgQuery<{ n: number }>(dbUrl, `SELECT count(*)::int AS n FROM orders WHERE ${where}`, params))[0]?.n ?? 0;

/** POSTs of `body()` to `path`, paced at `rate` for `seconds` (pacedLoad); the non-2xx answers and failed requests. */
async function pacedPosts(service: Service, path: string, body: () => string, o: { rate: number; seconds: number }): Promise<{ non2xx: number }> {
  const r = await pacedLoad({
    baseUrl: service.baseUrl,
    connections: cfg.connections,
    rate: o.rate,
    seconds: o.seconds,
    request: () => ({ method: 'POST', path, headers: service.headers, body: body() }),
  });
  log(`  sent ${r.sent} in ${r.seconds} s; answered within ${r.answerMsP99} ms (p99) of their planned departure, ${r.answerMsMax} at most`);
  return { non2xx: r.non2xx + r.errors };
}

/** Orders of `customerId`: a stream paced at `rate` for `seconds`, or `amount` as fast as the connections go. */
async function create(service: Service, customerId: string, o: { rate: number; seconds: number } | { amount: number }): Promise<{ non2xx: number }> {
  if ('rate' in o) {
    const body = orderBody(customerId);
    return pacedPosts(service, '/orders', () => body, o);
  }
  return autocannon({
    url: `${service.baseUrl}/orders`,
    connections: cfg.connections,
    method: 'POST',
    headers: service.headers,
    body: orderBody(customerId),
    amount: o.amount,
  });
}

/** Whether `done` came to hold within `timeoutMs` (polled every 200 ms). */
const within = (done: () => Promise<boolean>, timeoutMs: number, what: string) =>
  until(done, timeoutMs, what, 200).then(
    () => true,
    () => false,
  );

/** The payment reminders of `customerId`'s orders: counts, rates first to last, lateness after payment_remind_at. */
async function paymentReminders(customerId: string, leadS: number): Promise<PaymentReminders> {
  const of = `FROM notifications n JOIN orders o ON o.id = n.order_id WHERE o.customer_id = $1 AND n.kind = 'ORDER_PAYMENT_REMINDER'`;
  const [t] = await pgQuery<{ written: number; sent: number; ws: number | null; ss: number | null }>(
    dbUrl,
    `SELECT count(*)::int AS written, count(n.sent_at)::int AS sent,
            extract(epoch FROM max(n.created_at) - min(n.created_at))::float8 AS ws,
            extract(epoch FROM max(n.sent_at) - min(n.sent_at))::float8 AS ss ${of}`,
    [customerId],
  );
  const perSec = (n: number, s: number | null | undefined) => (s && s > 0 ? round(n / s, 0) : 0);
  const late = (column: 'created_at' | 'sent_at') =>
    lateness(`SELECT extract(epoch FROM n.${column} - o.payment_remind_at)::float8 * 1000 AS ms ${of} AND n.${column} IS NOT NULL`, [customerId]);
  return {
    leadS,
    written: t?.written ?? 0,
    writtenPerSec: perSec(t?.written ?? 0, t?.ws),
    delivered: t?.sent ?? 0,
    deliveredPerSec: perSec(t?.sent ?? 0, t?.ss),
    writtenLatenessMs: await late('created_at'),
    deliveredLatenessMs: await late('sent_at'),
  };
}

/**
 * How many of `customerId`'s orders have a notice (a payment reminder, a cancel notice)
 * still to be delivered (PENDING or SENDING): the orders found by key from
 * the few unsettled rows, whatever the planner knows of tables never analyzed
 * (a join of the two ran for minutes).
 */
const noticesUnsettled = async (customerId: string) =>
  (
    await pgQuery<{ n: number }>(
      dbUrl,
      `SELECT count(*)::int AS n FROM orders
        WHERE customer_id = $1 AND id = ANY(ARRAY(SELECT order_id FROM notifications WHERE status IN ('PENDING', 'SENDING') AND order_id IS NOT NULL))`,
      [customerId],
    )
  )[0]?.n ?? 0;

async function stream(run: ReturnType<typeof openBenchRun>, env: Record<string, string>): Promise<Stream> {
  // Expiries start once creation is over: the window is the stream plus 10 s.
  const windowS = Math.ceil(cfg.seconds) + 10;
  const leadS = cfg.paymentReminderS;
  const receiver = leadS > 0 || cfg.noticesToReceiver ? await startReceiver() : null;
  const reminding: Record<string, string> = {
    ...(receiver ? { NOTIFY_ORDERS_WEBHOOK_URL: receiver.url } : {}),
    ...(leadS > 0 ? { PAYMENT_REMINDER_BEFORE_SECONDS: String(leadS) } : {}),
  };
  const service = await run.startService({ ...env, ORDER_PAYMENT_TIMEOUT_SECONDS: String(windowS), ...reminding });
  const cpu0 = await cpuMark(service, dbUrl, run.redis);
  try {
    log(`stream: POST /orders at ${cfg.rate}/s for ${cfg.seconds} s, each expiring ${windowS} s later`);
    const r = await create(service, STREAM, { rate: cfg.rate, seconds: cfg.seconds });
    const created = await count('customer_id = $1', [STREAM]);
    log(`  created ${created} (${round(created / cfg.seconds, 1)}/s), ${r.non2xx} non-2xx; waiting for their expiries`);
    // The last order expires a window after the creation ended: no polls until then (a count
    // of the UNPAID orders reads them all, and competes with what is measured).
    await sleep(windowS * 1_000);
    await within(async () => (await count(`customer_id = $1 AND status = 'UNPAID'`, [STREAM])) === 0, 120_000, 'the stream to expire');
    const latenessMs = await lateness(
      `SELECT extract(epoch FROM cancelled_at - expires_at)::float8 * 1000 AS ms FROM orders WHERE customer_id = $1 AND status = 'CANCELLED'`,
      [STREAM],
    );
    // Every reminder was written before its order expired; the last deliveries (and cancel notices) may still be on their way.
    await within(async () => (await noticesUnsettled(STREAM)) === 0, 60_000, 'the notices to be delivered');
    const cpuUsPerOrder = cpuPerItem(cpu0, await cpuMark(service, dbUrl, run.redis), created);
    return {
      asked: Math.round(cfg.rate * cfg.seconds),
      created,
      createdPerSec: round(created / cfg.seconds, 1),
      non2xx: r.non2xx,
      windowS,
      cancelled: latenessMs?.count ?? 0,
      latenessMs,
      paymentReminders: leadS > 0 ? await paymentReminders(STREAM, leadS) : null,
      cpuUsPerOrder,
    };
  } finally {
    await run.stopService();
    await receiver?.close();
  }
}

/**
 * What autovacuum does between bursts in production, before each drain: this
 * machine's PostgreSQL runs with autovacuum off, and a drain measured after a
 * stream otherwise reads through the stream's dead rows on tables never
 * analyzed (the reminder drain after the reminder stream: 1 334 written a
 * second against 5 052 on its own).
 */
let autovacuum = 'unknown';

async function vacuum(): Promise<void> {
  const t = performance.now();
  await pgQuery(dbUrl, 'VACUUM ANALYZE');
  log(`  VACUUM ANALYZE in ${Math.round(performance.now() - t)} ms`);
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
  await vacuum();
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

// ---------------------------------------------------------------- reminders
const REMIND_STREAM = 'cust-remind-stream';
const REMIND_DRAIN = 'cust-remind-drain';
const LEAD_S = 60;

type ReminderStream = { asked: number; booked: number; bookedPerSec: number; non2xx: number; written: Lateness | null; delivered: Lateness | null };
type ReminderDrain = {
  appointments: number;
  booked: number;
  written: number;
  writtenPerSec: number;
  delivered: number;
  deliveredPerSec: number;
  /** CPU per reminder written and delivered, µs, from the drain's service start to its last SENT mark (the receiver's is the bench's). */
  cpuUsPerReminder: CpuPerItem;
};

/** A receiver of the reminders: answers every call 204 at once. */
async function startReceiver(): Promise<{ url: string; calls: () => number; close: () => Promise<void> }> {
  let calls = 0;
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      calls++;
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/reminders`, calls: () => calls, close: () => new Promise((r) => server.close(() => r())) };
}

/** Books appointments through the API, each its own contact, starting `startsInMs` after it is sent, with a 60 s lead: paced at `rate` for `seconds`, or `amount` as fast as the connections go. */
async function book(
  service: Service,
  customerId: string,
  startsInMs: number,
  o: { rate: number; seconds: number } | { amount: number },
): Promise<{ non2xx: number }> {
  let n = 0;
  const body = () =>
    JSON.stringify({
      customerId,
      contact: `r${n++}@example.com`,
      channel: 'email',
      startsAt: new Date(Date.now() + startsInMs).toISOString(),
      remindBeforeSeconds: LEAD_S,
    });
  if ('rate' in o) return pacedPosts(service, '/appointments', body, o);
  return autocannon({
    url: service.baseUrl,
    connections: cfg.connections,
    amount: o.amount,
    requests: [{ method: 'POST', path: '/appointments', headers: service.headers, setupRequest: (req) => ({ ...req, body: body() }) }],
  });
}

/**
 * Reminders of `customerId` written, or SENT. A join over every reminder of
 * the run (about 100 ms at 50 000): a wait asks the receiver first, and this
 * only once the receiver has had every call (polled every 200 ms, it took a
 * third of a core from the drain it measured).
 */
const reminders = async (customerId: string, what: 'written' | 'sent') =>
  (
    await pgQuery<{ n: number }>(
      dbUrl,
      `SELECT count(*)::int AS n FROM notifications n JOIN appointments a ON a.id = n.appointment_id
        WHERE a.customer_id = $1 ${what === 'sent' ? `AND n.status = 'SENT'` : ''}`,
      [customerId],
    )
  )[0]?.n ?? 0;
const appointments = async (customerId: string) =>
  (await pgQuery<{ n: number }>(dbUrl, 'SELECT count(*)::int AS n FROM appointments WHERE customer_id = $1', [customerId]))[0]?.n ?? 0;

/** Lateness of the reminders of `customerId`, written (created_at) or delivered (sent_at), after their remind times. */
const reminderLateness = (customerId: string, column: 'created_at' | 'sent_at') =>
  lateness(
    `SELECT extract(epoch FROM n.${column} - a.remind_at)::float8 * 1000 AS ms
       FROM notifications n JOIN appointments a ON a.id = n.appointment_id
      WHERE a.customer_id = $1 AND n.${column} IS NOT NULL`,
    [customerId],
  );

async function reminderStream(run: ReturnType<typeof openBenchRun>, env: Record<string, string>): Promise<ReminderStream> {
  const receiver = await startReceiver();
  // Remind times start once booking is over: the stream plus 10 s after each booking.
  const remindInS = Math.ceil(cfg.seconds) + 10;
  const service = await run.startService({ ...env, NOTIFY_REMINDERS_WEBHOOK_URL: receiver.url });
  try {
    log(`reminders: POST /appointments at ${cfg.rate}/s for ${cfg.seconds} s, each reminded ${remindInS} s later`);
    const r = await book(service, REMIND_STREAM, (remindInS + LEAD_S) * 1_000, { rate: cfg.rate, seconds: cfg.seconds });
    const booked = await appointments(REMIND_STREAM);
    log(`  booked ${booked} (${round(booked / cfg.seconds, 1)}/s), ${r.non2xx} non-2xx; waiting for their reminders`);
    await within(
      async () => receiver.calls() >= booked && (await reminders(REMIND_STREAM, 'sent')) >= (await appointments(REMIND_STREAM)),
      (remindInS + 180) * 1_000,
      'the reminders to go out',
    );
    return {
      asked: Math.round(cfg.rate * cfg.seconds),
      // Counted again: requests still in flight when the load generator stopped booked theirs later.
      booked: await appointments(REMIND_STREAM),
      bookedPerSec: round(booked / cfg.seconds, 1),
      non2xx: r.non2xx,
      written: await reminderLateness(REMIND_STREAM, 'created_at'),
      delivered: await reminderLateness(REMIND_STREAM, 'sent_at'),
    };
  } finally {
    await run.stopService();
    await receiver.close();
  }
}

async function reminderDrain(run: ReturnType<typeof openBenchRun>, env: Record<string, string>): Promise<ReminderDrain> {
  // The API alone: appointments and their reminder jobs are written, nobody works them off.
  const api = await run.startService(env, [], 'api');
  try {
    log(`reminder drain: ${cfg.overdue} appointments reminded a second after booking, through an API-only process`);
    const r = await book(api, REMIND_DRAIN, (LEAD_S + 1) * 1_000, { amount: cfg.overdue });
    if (r.non2xx) log(`  ${r.non2xx} non-2xx`);
  } finally {
    await run.stopService();
  }
  const booked = await appointments(REMIND_DRAIN);
  await vacuum();
  await sleep(1_500); // every remind time passed
  const receiver = await startReceiver();
  const service = await run.startService({ ...env, NOTIFY_REMINDERS_WEBHOOK_URL: receiver.url });
  const cpu0 = await cpuMark(service, dbUrl, run.redis);
  const done = await within(async () => receiver.calls() >= booked && (await reminders(REMIND_DRAIN, 'sent')) >= booked, 600_000, 'the reminder drain');
  const cpuUsPerReminder = cpuPerItem(cpu0, await cpuMark(service, dbUrl, run.redis), booked);
  await run.stopService();
  await receiver.close();
  if (!done) log('  not drained within 10 minutes');
  const [t] = await pgQuery<{ w: number; ws: number | null; d: number; ds: number | null }>(
    dbUrl,
    `SELECT count(*)::int AS w, extract(epoch FROM max(n.created_at) - min(n.created_at))::float8 AS ws,
            count(n.sent_at)::int AS d, extract(epoch FROM max(n.sent_at) - min(n.sent_at))::float8 AS ds
       FROM notifications n JOIN appointments a ON a.id = n.appointment_id WHERE a.customer_id = $1`,
    [REMIND_DRAIN],
  );
  const rate = (n: number, s: number | null | undefined) => (s && s > 0 ? round(n / s, 0) : 0);
  return {
    appointments: cfg.overdue,
    booked,
    written: t?.w ?? 0,
    writtenPerSec: rate(t?.w ?? 0, t?.ws),
    delivered: t?.d ?? 0,
    deliveredPerSec: rate(t?.d ?? 0, t?.ds),
    cpuUsPerReminder,
  };
}

const cpuText = (c: CpuPerItem) => {
  const us = (x: number | null) => (x === null ? '—' : `${fmt(x)} µs`);
  return `PostgreSQL ${us(c.postgres)}, service (Node) ${us(c.service)}, Redis ${us(c.redis)}, bench and receiver ${us(c.bench)}`;
};

function reminderRows(rs: ReminderStream | null, rd: ReminderDrain | null): string[] {
  const l = (x: Lateness | null) => (x ? `p50 ${fmt(x.p50)} / p99 ${fmt(x.p99)} / max ${fmt(x.max)} ms` : '—');
  return [
    ...(rs
      ? [
          `| Reminder stream, asked ${fmt(cfg.rate)}/s for ${cfg.seconds} s | booked ${fmt(rs.booked)} (${fmt(rs.bookedPerSec)}/s); written ${l(rs.written)}; delivered ${l(rs.delivered)} | as the expiry stream | ${rs.written && rs.bookedPerSec >= 2_000 ? (rs.written.p99 <= TARGET.streamP99Ms && rs.written.max <= TARGET.streamMaxMs ? 'yes' : 'no') : 'not judged'} |`,
        ]
      : []),
    ...(rd
      ? [
          `| Reminder drain, ${fmt(rd.booked)} appointments | ${fmt(rd.writtenPerSec)} written/s, ${fmt(rd.deliveredPerSec)} delivered/s (${fmt(rd.written)} written, ${fmt(rd.delivered)} delivered, first to last); CPU a reminder: ${cpuText(rd.cpuUsPerReminder)} | ≥ ${fmt(TARGET.drainPerSec)}/s | ${rd.booked >= 100_000 ? (rd.deliveredPerSec >= TARGET.drainPerSec ? 'yes' : 'no') : 'not judged'} |`,
        ]
      : []),
  ];
}

function markdown(date: string, machine: Machine, s: Stream, d: Drain, rs: ReminderStream | null, rd: ReminderDrain | null): string {
  const l = s.latenessMs;
  return [
    `## ${date}`,
    '',
    ...machineLines(machine),
    `- Orders through POST /orders with ${cfg.connections} connections; service as \`npm start\` runs it (API and workers, one process), DATABASE_POOL_SIZE ${cfg.dbPool}.`,
    `- PostgreSQL autovacuum ${autovacuum}; each drain starts after a VACUUM ANALYZE of the run's database (what autovacuum would have done after the scenarios before it).`,
    '',
    '| Scenario | Figure | Target | Met |',
    '|---|---|---|---|',
    `| Expiry stream, asked ${fmt(cfg.rate)}/s for ${cfg.seconds} s, notices to ${cfg.paymentReminderS > 0 || cfg.noticesToReceiver ? 'a local receiver' : 'the log'} | created ${fmt(s.created)} (${fmt(s.createdPerSec)}/s), cancelled ${fmt(s.cancelled)}; lateness p50 ${l ? fmt(l.p50) : '—'} / p99 ${l ? fmt(l.p99) : '—'} / max ${l ? fmt(l.max) : '—'} ms; CPU an order: ${cpuText(s.cpuUsPerOrder)} | p99 ≤ ${TARGET.streamP99Ms}, max ≤ ${TARGET.streamMaxMs} ms at 2 000/s | ${l && s.createdPerSec >= 2_000 ? (l.p99 <= TARGET.streamP99Ms && l.max <= TARGET.streamMaxMs ? 'yes' : 'no') : 'not judged'} |`,
    ...(s.paymentReminders
      ? [
          `| Payment reminders of the stream, ${fmt(s.paymentReminders.leadS)} s before the deadline | ${fmt(s.paymentReminders.writtenPerSec)} written/s, ${fmt(s.paymentReminders.deliveredPerSec)} delivered/s (${fmt(s.paymentReminders.written)} written, ${fmt(s.paymentReminders.delivered)} delivered, first to last); written late p99 ${s.paymentReminders.writtenLatenessMs ? fmt(s.paymentReminders.writtenLatenessMs.p99) : '—'} ms, delivered late p99 ${s.paymentReminders.deliveredLatenessMs ? fmt(s.paymentReminders.deliveredLatenessMs.p99) : '—'} ms | — | — |`,
        ]
      : []),
    `| Overdue drain, ${fmt(d.created)} orders | ${fmt(d.perSec)} cancellations/s (${fmt(d.cancelled)} in ${fmt(d.seconds)} s, first to last) | ≥ ${fmt(TARGET.drainPerSec)}/s | ${d.created >= 100_000 ? (d.perSec >= TARGET.drainPerSec ? 'yes' : 'no') : 'not judged'} |`,
    ...reminderRows(rs, rd),
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
    autovacuum = (await pgQuery<{ autovacuum: string }>(cfg.pgAdminUrl, 'SHOW autovacuum'))[0]?.autovacuum ?? 'unknown';
    await run.createDatabase();
    const env = { LOG_LEVEL: process.env.BENCH_SERVICE_LOG_LEVEL ?? 'warn', QUEUE_PREFIX: queuePrefix, DATABASE_POOL_SIZE: String(cfg.dbPool) };
    const s = cfg.scenarios.includes('stream') ? await stream(run, env) : null;
    if (s)
      log(`  stream: ${JSON.stringify(s.latenessMs)}; payment reminders: ${JSON.stringify(s.paymentReminders)}; CPU an order: ${cpuText(s.cpuUsPerOrder)}`);
    const d = cfg.scenarios.includes('drain') ? await drain(run, env) : null;
    if (d) log(`  drain: ${JSON.stringify(d)}`);
    const rs = cfg.scenarios.includes('reminders') ? await reminderStream(run, env) : null;
    if (rs) log(`  reminders: ${JSON.stringify(rs)}`);
    const rd = cfg.scenarios.includes('reminderDrain') ? await reminderDrain(run, env) : null;
    if (rd) log(`  reminder drain: ${JSON.stringify(rd)}`);
    const machine = machineInfo(versions);
    process.stdout.write(
      `${JSON.stringify({ benchmark: 'e2e', date, runTag, settings: cfg, machine, target: TARGET, stream: s, drain: d, reminders: rs, reminderDrain: rd }, null, 2)}\n`,
    );
    // A partial run (a profile) is not a row of the record.
    if (cfg.write && s && d) {
      const intro = [
        'How to run: `npm run bench:e2e` (PostgreSQL at `BENCH_PG_URL`, Redis at `REDIS_URL`); knobs at the top of',
        '`bench/e2e.bench.ts`. Lateness is `cancelled_at - expires_at` on the database clock. The JSON on stdout holds every figure.',
      ];
      log(`wrote ${writeMarkedSection(markdown(date, machine, s, d, rs, rd), { heading: HEADING, intro, marker: MARKER })}`);
    }
  } finally {
    await run.cleanup();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`bench:e2e failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
