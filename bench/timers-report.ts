// The timers benchmark's results: their shape (the JSON it prints), its
// dated section of bench/HISTORY.md and its rows of BENCHMARKS.md's current figures.
import type { Percentiles } from './bench-util.js';
import type { ProfileTop } from './cpu-profile-top.js';
import type { CurrentRow } from './current-figures.js';
import { fmt, type Machine, machineLines, round, writeMarkedSection } from './http-harness.js';
import type { TargetKind } from './timers-receivers.js';

export const TIMERS_TARGET = { createPerSec: 10_000, createGoalPerSec: 20_000, p99Ms: { webhook: 20, amqp: 10, nats: 10 } } as const;

/** A run of POST /timers/batch requests. */
export type Posted = {
  timers: number;
  requests: number;
  seconds: number;
  /** Timers answered 201 a second, first request sent to last answer received. */
  perSec: number;
  requestMs: Percentiles | null;
  /** Items by their status, and `request <status>` for whole requests refused. */
  statuses: Record<string, number>;
  /** Requests sent again after a 503 or 429. */
  retried: number;
  failed: number;
};

export type Phase = {
  kind: TargetKind;
  asked: number;
  created: Posted;
  /** Time left between the end of creation (and its VACUUM) and the first fire time: a phase whose creation overran it is not clean. */
  leadLeftMs: number;
  delivered: number;
  duplicates: number;
  missing: number;
  latenessMs: Percentiles | null;
  laterThan100Ms: number;
  /** Lateness of the timers due in each second of the phase. */
  bySecond: { s: number; n: number; p50: number; p99: number; max: number }[];
  /** % of one core over the phase's fire times; machineCores: the machine's busy cores. */
  cpuPct: Record<string, number | null>;
  /** Transactions committed in the run's database over the phase's fire times, per timer of the phase. */
  pgCommitsPerTimer?: number;
  targetP99Ms: number;
  met: boolean | null;
  profile?: ProfileTop & { file: string };
};

export type TimersReport = {
  benchmark: 'timers';
  date: string;
  runTag: string;
  commit: string;
  settings: {
    create: number;
    batch: number;
    inFlight: number;
    rate: number;
    seconds: number;
    fullSize: boolean;
    autovacuum: string;
    recordLayout: string;
  } & Record<string, unknown>;
  machine: Machine;
  /** The machine's 1, 5 and 15 minute load averages at the start and the end (other users' work included). */
  loadAverage: { start: number[]; end: number[] };
  target: typeof TIMERS_TARGET;
  creation: (Posted & { met: boolean | null }) | null;
  phases: Phase[];
  strays: number;
};

const KIND_NAME: Record<TargetKind, string> = {
  webhook: 'a webhook (receiver in the bench process)',
  amqp: 'AMQP (RabbitMQ, durable queue, publisher confirms)',
  nats: 'NATS JetStream (file stream)',
};
const met = (m: boolean | null) => (m === null ? 'not judged' : m ? 'yes' : 'no');
const ms1 = (x: number) => fmt(round(x, 1));
const lat = (l: Percentiles | null) => (l ? `${ms1(l.p50)} / ${ms1(l.p99)} / ${ms1(l.max)}` : '—');
const reqMs = (c: Posted) => `${fmt(Math.round(c.requestMs?.p50 ?? 0))} / ${fmt(Math.round(c.requestMs?.p99 ?? 0))}`;
const cpuText = (c: Record<string, number | null>) =>
  Object.entries(c)
    .filter(([k, v]) => v !== null && k !== 'machineCores')
    .map(([k, v]) => `${k} ${fmt(v as number)} %`)
    .join(', ') + (c.machineCores === null || c.machineCores === undefined ? '' : `; machine ${fmt(c.machineCores)} cores busy`);

function markdown(r: TimersReport): string {
  const s = r.settings;
  const c = r.creation;
  const rows = [
    ...(c
      ? [
          `| Creation, ${fmt(s.create)} timers, ${fmt(s.batch)} a request, ${s.inFlight} in flight | ${fmt(c.perSec)} created/s (${fmt(c.requests)} requests in ${fmt(c.seconds)} s); request p50 / p99 ${reqMs(c)} ms; ${c.retried} sent again (503), ${c.failed} failed; after a warm-up of ${fmt(Number(s.warmup ?? 0))} | ≥ ${fmt(r.target.createPerSec)}/s (goal ${fmt(r.target.createGoalPerSec)}) | ${met(c.met)} |`,
        ]
      : []),
    ...r.phases.map(
      (p) =>
        `| Delivery to ${KIND_NAME[p.kind]}, ${fmt(s.rate)}/s for ${s.seconds} s | delivered ${fmt(p.delivered)} of ${fmt(p.asked)}, ${p.duplicates} duplicates; lateness p50 / p99 / max ${lat(p.latenessMs)} ms, ${fmt(p.laterThan100Ms)} over 100 ms; CPU (% of a core): ${cpuText(p.cpuPct)}${p.leadLeftMs < 1_000 ? `; creation overran its lead (${p.leadLeftMs} ms left)` : ''} | p99 ≤ ${p.targetP99Ms} ms | ${met(p.met)} |`,
    ),
  ];
  return [
    `## ${r.date}`,
    '',
    ...machineLines(r.machine),
    `- Service: \`src/main.ts api\` and \`src/main.ts worker\`, two processes, default configuration (record layout ${s.recordLayout}); commit ${r.commit}; load average (1 / 5 / 15 min) ${r.loadAverage.start.join(' / ')} at the start, ${r.loadAverage.end.join(' / ')} at the end.`,
    `- PostgreSQL autovacuum ${s.autovacuum}${s.autovacuum === 'off' ? '; a VACUUM ANALYZE after each creation (what autovacuum would do after the burst)' : ''}. Lateness: arrival at the receiver or consumer - fireAt, one clock. CPU over each phase's fire times, in % of one core; "machine" counts every process on it, other users' included.`,
    '',
    '| Scenario | Figure | Target | Met |',
    '|---|---|---|---|',
    ...rows,
    '',
  ].join('\n');
}

export function writeTimersSection(r: TimersReport, file?: string): string {
  return writeMarkedSection(
    markdown(r),
    {
      heading: '# Timers benchmark',
      intro: [
        'How to run: `npm run bench:timers` (PostgreSQL at `BENCH_PG_URL`, Redis at `REDIS_URL`, RabbitMQ and NATS JetStream at',
        '`BENCH_AMQP_URL` and `BENCH_NATS_URL`); knobs at the top of `bench/timers.bench.ts`. The JSON on stdout holds every figure.',
      ],
      marker: '<!-- timers runs: newest first -->',
    },
    file,
  );
}

/** This bench's rows of BENCHMARKS.md's current figures (a full-size run's). */
export function timersCurrentRows(r: TimersReport, layout: string): CurrentRow[] {
  const s = r.settings;
  const base = {
    layout,
    measured: `${r.date.slice(0, 10)}, ${r.machine.cpu.replace(/\(R\)/g, '').replace(/ Processor$/, '')}, ${r.machine.cores} cores`,
    commit: r.commit,
    command: '`npm run bench:timers`',
  };
  const c = r.creation;
  return [
    ...(c
      ? [
          {
            ...base,
            figure: `Timers through POST /timers/batch, ${fmt(s.batch)} a request, ${s.inFlight} in flight: created/s (request p50 / p99 ms)`,
            ours: `${fmt(c.perSec)} (${reqMs(c)})`,
          },
        ]
      : []),
    ...r.phases.map((p) => ({
      ...base,
      figure: `Timer delivery lateness at ${fmt(s.rate)}/s, ${KIND_NAME[p.kind]}: p50 / p99 / max (ms)`,
      ours: `${lat(p.latenessMs)} (${fmt(p.delivered)} delivered, ${p.duplicates} duplicates)`,
    })),
  ];
}
