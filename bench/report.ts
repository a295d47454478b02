// Turns one run's results into a markdown section and prepends it to the queue
// part of bench/HISTORY.md, below the header that part already has; and into
// the queue's rows of BENCHMARKS.md's current-figures table (current-figures.ts).
import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { ENGINES, ENGINE_LABEL, type EngineName } from './bench-config.js';
import { type CurrentRow, benchCommit, layoutName, updateCurrentFigures } from './current-figures.js';
import type { RunResults, RunMeta } from './results.js';

const FILE = fileURLToPath(new URL('./HISTORY.md', import.meta.url));
const MARKER = '<!-- runs: newest first; `npm run bench` inserts each run below this line -->';

// Only for a bench/HISTORY.md without the marker: the file's own text above the
// marker (method, how to read the figures) is kept as it is.
const HEADER = `# Queue benchmark (\`npm run bench\`): our delay queue and its peers

How to run: \`npm run bench\` (Redis at \`REDIS_URL\`, PostgreSQL at \`BENCH_DATABASE_URL\`).

${MARKER}
`;

type Row = {
  label: string;
  get: (r: RunResults[EngineName]) => number | undefined;
  target?: { op: '>=' | '<='; value: number };
};

const lat = (key: 'lateness1' | 'lateness4', q: 'p50' | 'p99' | 'p999' | 'max') => (r: RunResults[EngineName]) => {
  const v = r?.[key];
  return v && 'wall' in v ? v.wall?.[q] : undefined;
};

function rows(): Row[] {
  const out: Row[] = [
    { label: 'Enqueue, delayed jobs/s', get: (r) => ok(r?.enqueue)?.jobsPerSec, target: { op: '>=', value: 100_000 } },
    { label: 'Memory per pending job, used_memory delta (B; Redis only)', get: (r) => ok(r?.memory)?.usedMemoryBytesPerJob, target: { op: '<=', value: 180 } },
    {
      label: 'Storage per pending job: MEMORY USAGE of keys, or tables with indexes (B)',
      get: (r) => ok(r?.memory)?.keyBytesPerJob,
      target: { op: '<=', value: 180 },
    },
    { label: QUEUE_FIGURES.storagectl, get: (r) => ok(r?.memoryctl)?.keyBytesPerJob },
    { label: 'Claim + ack, concurrency 1 (jobs/s)', get: (r) => ok(r?.claim1)?.jobsPerSec, target: { op: '>=', value: 5_000 } },
    { label: 'Claim + ack, concurrency 50 (jobs/s)', get: (r) => ok(r?.claim50)?.jobsPerSec, target: { op: '>=', value: 50_000 } },
    { label: QUEUE_FIGURES.claim50ctl, get: (r) => ok(r?.claim50ctl)?.jobsPerSec },
  ];
  for (const [key, procs] of [
    ['lateness1', 1],
    ['lateness4', 4],
  ] as const) {
    for (const q of ['p50', 'p99', 'p999', 'max'] as const) {
      const target = q === 'p99' ? { op: '<=' as const, value: 5 } : q === 'max' ? { op: '<=' as const, value: 25 } : undefined;
      out.push({
        label: `Lateness ${procs} process${procs > 1 ? 'es' : ''} x c50, ${q === 'p999' ? 'p99.9' : q} (ms)`,
        get: lat(key, q),
        ...(target ? { target } : {}),
      });
    }
  }
  return out;
}

function ok<T extends object>(v: T | { error: string } | undefined): T | undefined {
  return v && !('error' in v) ? (v as T) : undefined;
}

const fmt = (v: number | undefined) => (v === undefined ? '—' : v.toLocaleString('en-US', { maximumFractionDigits: 2 }).replace(/,/g, ' '));

export function sectionFor(meta: RunMeta, results: RunResults): string {
  const engines = ENGINES.filter((e) => results[e] !== undefined);
  const peers = engines.filter((e) => e !== 'ours');
  const lines = [
    `## ${meta.date}${meta.scale === 1 ? '' : ` — scale ${meta.scale} (short run: job counts scaled down, not comparable with the targets)`}`,
    '',
    `- Machine: ${meta.machine.cpu}, ${meta.machine.cores} cores, ${meta.machine.memoryGiB} GiB RAM, ${meta.machine.os}`,
    `- Node ${meta.node}, Redis ${meta.redis}, ${meta.postgres.split(' on ')[0]}, bullmq ${meta.bullmq}, pg-boss ${meta.pgBoss}, graphile-worker ${meta.graphileWorker}, ioredis ${meta.ioredis}`,
    `- Jobs: enqueue ${meta.counts.enqueue} (chunks of 1 000, ${meta.counts.enqueueInFlight} in flight), claim ${meta.counts.claim}, lateness ${meta.counts.lateness} over ${meta.counts.latenessWindowMs} ms`,
    '',
    `| Metric | ${engines.map((e) => ENGINE_LABEL[e]).join(' | ')} | ${peers.map((p) => `Ours / ${ENGINE_LABEL[p]}`).join(' | ')} | Target (ours) | Target met |`,
    `|---|${engines.map(() => '---:').join('|')}|${peers.map(() => '---:').join('|')}|---|---|`,
  ];
  for (const row of rows()) {
    const values = engines.map((e) => row.get(results[e]));
    if (values.every((v) => v === undefined)) continue;
    const a = row.get(results.ours);
    const ratios = peers.map((p) => {
      const b = row.get(results[p]);
      return a !== undefined && b !== undefined && b !== 0 ? fmt(Math.round((a / b) * 100) / 100) : '—';
    });
    const target = row.target ? `${row.target.op === '>=' ? '≥' : '≤'} ${fmt(row.target.value)}` : '';
    // Targets are for full-size runs; a scaled-down run is not judged against them.
    const met =
      row.target && a !== undefined && meta.scale === 1 ? ((row.target.op === '>=' ? a >= row.target.value : a <= row.target.value) ? 'yes' : 'no') : '';
    lines.push(`| ${row.label} | ${values.map(fmt).join(' | ')} | ${ratios.join(' | ')} | ${target} | ${met} |`);
  }
  const errors = engines.flatMap((e) =>
    Object.entries(results[e] ?? {}).flatMap(([s, v]) => (v && typeof v === 'object' && 'error' in v ? [`- ${e} ${s} failed: ${String(v.error)}`] : [])),
  );
  if (errors.length) lines.push('', ...errors);
  return `${lines.join('\n')}\n`;
}

export function writeReport(section: string, file = FILE): string {
  const old = existsSync(file) ? readFileSync(file, 'utf8') : '';
  const at = old.indexOf(MARKER);
  const head = at >= 0 ? old.slice(0, at + MARKER.length) : HEADER.trimEnd();
  const runs = at >= 0 ? old.slice(at + MARKER.length).replace(/^\n+/, '') : old;
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, `${head}\n\n${section}${runs ? `\n${runs}` : ''}`);
  renameSync(tmp, file);
  return file;
}

/** The queue benchmark's figures in the current-figures table (their keys: these labels and the layout). */
export const QUEUE_FIGURES = {
  enqueue: 'Enqueue, delayed jobs/s',
  storage: 'Storage per pending job: MEMORY USAGE of keys, or tables with indexes (B)',
  storagectl: 'Storage per pending job, ten priorities in use (B)',
  claim50: 'Claim + ack, concurrency 50 (jobs/s)',
  claim50ctl: 'Claim + ack, c50, priorities and a rate limit in use, not biting (jobs/s)',
  claim1: 'Claim + ack, concurrency 1 (jobs/s)',
  lateness1: 'Wake-up lateness, 1 process x c50, p99 / max (ms)',
  lateness4: 'Wake-up lateness, 4 processes x c50, p99 / max (ms)',
} as const;

/** A full-size run's rows of the current-figures table; none for a scaled-down run (not comparable). */
export function currentRows(meta: RunMeta, results: RunResults, recordGroups: boolean, commit = benchCommit()): CurrentRow[] {
  if (meta.scale !== 1) return [];
  const measured = `${meta.date.slice(0, 10)}, ${meta.machine.cpu.replace(/\(R\)/g, '').replace(/ Processor$/, '')}, ${meta.machine.cores} cores`;
  const base = { layout: layoutName(recordGroups), measured, commit, command: '`npm run bench`' };
  const one = (get: (r: RunResults[EngineName]) => number | undefined) => {
    const v = (e: EngineName) => (results[e] === undefined ? undefined : fmt(get(results[e])));
    return { ours: v('ours') ?? '—', bullmq: v('bullmq'), pgBoss: v('pgboss'), graphile: v('graphile') };
  };
  const pair = (key: 'lateness1' | 'lateness4') => {
    const v = (e: EngineName) => (results[e] === undefined ? undefined : `${fmt(lat(key, 'p99')(results[e]))} / ${fmt(lat(key, 'max')(results[e]))}`);
    return { ours: v('ours') ?? '—', bullmq: v('bullmq'), pgBoss: v('pgboss'), graphile: v('graphile') };
  };
  const rows: CurrentRow[] = [
    { figure: QUEUE_FIGURES.enqueue, ...one((r) => ok(r?.enqueue)?.jobsPerSec), ...base },
    { figure: QUEUE_FIGURES.storage, ...one((r) => ok(r?.memory)?.keyBytesPerJob), ...base },
    { figure: QUEUE_FIGURES.storagectl, ...one((r) => ok(r?.memoryctl)?.keyBytesPerJob), ...base },
    { figure: QUEUE_FIGURES.claim50, ...one((r) => ok(r?.claim50)?.jobsPerSec), ...base },
    { figure: QUEUE_FIGURES.claim50ctl, ...one((r) => ok(r?.claim50ctl)?.jobsPerSec), ...base },
    { figure: QUEUE_FIGURES.claim1, ...one((r) => ok(r?.claim1)?.jobsPerSec), ...base },
    { figure: QUEUE_FIGURES.lateness1, ...pair('lateness1'), ...base },
    { figure: QUEUE_FIGURES.lateness4, ...pair('lateness4'), ...base },
  ];
  // A figure this run did not measure (BENCH_SCENARIOS) keeps its row.
  return rows.filter((r) => r.ours !== '—' && !r.ours.startsWith('— /'));
}

/** Writes the run's section to the history and its rows to BENCHMARKS.md; returns the files written. */
export function writeRun(meta: RunMeta, results: RunResults, recordGroups: boolean): string[] {
  const files = [writeReport(sectionFor(meta, results))];
  const rows = currentRows(meta, results, recordGroups);
  if (rows.length) files.push(updateCurrentFigures(rows));
  return files;
}
