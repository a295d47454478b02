// The appointments reconciliation pass with years of history behind it: a
// fresh database (the service's migrations) loaded with BENCH_HISTORY_APPOINTMENTS
// past appointments (BOOKED, each with its SENT reminder) and a day of
// bookings ahead inside their lead (all but 50 reminded already), then the pass's query (the real repository's listUnreminded) timed
// BENCH_HISTORY_RUNS times, with its plan. Issue 15's target: each pass <= 50 ms
// with 5 000 000 appointments of history.
//
// Run: `npm run bench:history` (PostgreSQL at BENCH_PG_URL, trust auth).
// Knobs: BENCH_HISTORY_APPOINTMENTS=1000000, BENCH_HISTORY_AHEAD=14000, BENCH_HISTORY_RUNS=20, BENCH_WRITE=0, BENCH_HISTORY_KEEP=1 (keep the database).
// Prints JSON on stdout; writes a section into BENCHMARKS.md unless BENCH_WRITE=0.
import { randomBytes } from 'node:crypto';
import { createDb } from '../src/core/db.js';
import { dedupeKeySql } from '../src/core/outbox.js';
import { createLogger } from '../src/core/logger.js';
import { migrate } from '../src/core/migrate.js';
import { createAppointmentsRepository } from '../src/modules/appointments/appointments.repository.js';
import {
  DEFAULT_PG_ADMIN_URL,
  fmt,
  machineInfo,
  machineLines,
  makeLog,
  num,
  postgresVersion,
  round,
  withDatabase,
  writeMarkedSection,
} from './http-harness.js';
import { pgQuery } from './pg-util.js';

const cfg = {
  appointments: Math.floor(num('BENCH_HISTORY_APPOINTMENTS', 1_000_000)),
  runs: Math.max(1, Math.floor(num('BENCH_HISTORY_RUNS', 20))),
  /** Booked appointments ahead (the next 23 h), every one inside its 24 h lead; all but 50 reminded already. */
  ahead: Math.floor(num('BENCH_HISTORY_AHEAD', 14_000)),
  write: process.env.BENCH_WRITE !== '0',
  /** Keep the loaded database (its name is logged) to look at plans afterwards. */
  keep: process.env.BENCH_HISTORY_KEEP === '1',
  pgAdminUrl: process.env.BENCH_PG_URL ?? DEFAULT_PG_ADMIN_URL,
};
const TARGET_MS = 50;
const log = makeLog('bench:history');
const dbName = `ots_bench_history_${randomBytes(4).toString('hex')}`;
const dbUrl = withDatabase(cfg.pgAdminUrl, dbName);

/** Writes a SENT reminder, keyed as the service keys it, for each appointment `from` names (as `a`). */
function remindSent(from: string): Promise<unknown> {
  return pgQuery(
    dbUrl,
    `INSERT INTO notifications (id, kind, dedupe_key, appointment_id, channel, recipient, payload, status, attempts, sent_at)
     SELECT gen_random_uuid(), 'APPOINTMENT_REMINDER', ${dedupeKeySql.appointmentReminder('a.id', 'a.starts_at')},
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
  // inside its lead window; all but the first 50 already have their reminder
  // (the steady state: what the pass reads every time, to find the 50).
  await pgQuery(
    dbUrl,
    `INSERT INTO appointments (id, customer_id, contact, channel, status, starts_at, remind_before_seconds, remind_at)
     SELECT gen_random_uuid(), 'ahead', 'a@example.com', 'EMAIL', 'BOOKED', s, 86400, now() - interval '1 hour'
       FROM (SELECT now() + (g::double precision / $1) * interval '23 hours' AS s FROM generate_series(1, $1) g) t`,
    [upcoming],
  );
  await remindSent(`appointments a WHERE a.customer_id = 'ahead' ORDER BY a.starts_at OFFSET 50`);
  await pgQuery(dbUrl, 'VACUUM ANALYZE appointments');
  await pgQuery(dbUrl, 'VACUUM ANALYZE notifications');
}

async function main(): Promise<void> {
  const date = new Date().toISOString();
  await pgQuery(cfg.pgAdminUrl, `CREATE DATABASE "${dbName}"`);
  const db = createDb(dbUrl, 2);
  try {
    await migrate(dbUrl, createLogger('warn'));
    const t0 = performance.now();
    await load(cfg.ahead);
    log(`loaded ${fmt(cfg.appointments)} past appointments with their reminders in ${round((performance.now() - t0) / 1_000, 1)} s`);
    const repo = createAppointmentsRepository(db);
    // As the pass calls it by default: grace 30 s, appointments started up to 300 s ago, horizon two intervals of 60 s, a page of 1 000.
    const pass = () => repo.listUnreminded({ graceSeconds: 30, afterStartSeconds: 300, horizonMs: 120_000 }, null, 1_000);
    await pass();
    const ms: number[] = [];
    let rows = 0;
    for (let i = 0; i < cfg.runs; i++) {
      const s = performance.now();
      rows = (await pass()).length;
      ms.push(performance.now() - s);
    }
    ms.sort((a, b) => a - b);
    const result = {
      benchmark: 'history',
      date,
      settings: cfg,
      machine: machineInfo({ postgres: await postgresVersion(cfg.pgAdminUrl), redis: 'not used' }),
      pass: { rows, p50Ms: round(ms[Math.floor(ms.length / 2)] ?? 0), maxMs: round(ms.at(-1) ?? 0), targetMs: TARGET_MS },
    };
    process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
    if (cfg.write) {
      const section = [
        `## ${date}`,
        '',
        ...machineLines(result.machine),
        '',
        '| History | Pass (listUnreminded, one page) p50 / max | Target | Met |',
        '|---|---|---|---|',
        `| ${fmt(cfg.appointments)} past appointments, each with its SENT reminder; ${fmt(cfg.ahead)} ahead inside their lead, 50 of them not reminded | ${result.pass.p50Ms} / ${result.pass.maxMs} ms over ${cfg.runs} runs (${rows} rows) | ≤ ${TARGET_MS} ms at 5 000 000 | ${cfg.appointments >= 5_000_000 ? (result.pass.maxMs <= TARGET_MS ? 'yes' : 'no') : 'not judged'} |`,
        '',
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
