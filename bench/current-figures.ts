// The "Current figures" table at the top of BENCHMARKS.md: one row per figure
// and record layout, each with its value, the peers' values, when, where, at
// which commit and by which command it was measured. A benchmark run replaces
// its own rows (by figure and layout) and keeps every other row as it is; its
// dated section goes to bench/HISTORY.md (http-harness.ts, report.ts).
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export const CURRENT_FILE = fileURLToPath(new URL('../BENCHMARKS.md', import.meta.url));
export const CURRENT_START = '<!-- current-figures: start (the benchmarks replace their own rows; keep the markers) -->';
export const CURRENT_END = '<!-- current-figures: end -->';

const COLUMNS = ['Figure', 'Ours', 'BullMQ', 'pg-boss', 'graphile-worker', 'Record layout', 'Measured', 'Commit', 'Command'] as const;

export type CurrentRow = {
  /** What is measured, with its unit; with `layout`, the row's key. */
  readonly figure: string;
  readonly ours: string;
  readonly bullmq?: string;
  readonly pgBoss?: string;
  readonly graphile?: string;
  /** The job-record layout it ran on: "one HASH" (the service's default), "record groups", or "n/a". */
  readonly layout: string;
  /** Date (YYYY-MM-DD) and machine, e.g. "2026-11-26, AMD EPYC 2 cores". */
  readonly measured: string;
  readonly commit: string;
  readonly command: string;
};

/** The record layout a bench's queue used, as the table names it. */
export const layoutName = (recordGroups: boolean): string => (recordGroups ? 'record groups' : 'one HASH');

/**
 * The commit the run measured: HEAD's short hash, "+ changes" when src/, lua/
 * or bench/ differ from it (the history file a run has just written does not count).
 */
export function benchCommit(cwd = fileURLToPath(new URL('..', import.meta.url))): string {
  try {
    const head = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd, encoding: 'utf8' }).trim();
    const dirty = execFileSync('git', ['status', '--porcelain', '--', 'src', 'lua', 'bench', ':!bench/HISTORY.md'], { cwd, encoding: 'utf8' }).trim();
    return dirty ? `${head} + changes` : head;
  } catch {
    return 'unknown';
  }
}

const cell = (v: string | undefined) => (v ?? '—').replace(/\|/g, '\\|').replace(/\n/g, ' ');
const line = (r: CurrentRow) => `| ${[r.figure, r.ours, r.bullmq, r.pgBoss, r.graphile, r.layout, r.measured, r.commit, r.command].map(cell).join(' | ')} |`;
const keyOfLine = (l: string): string | undefined => {
  const cells = l
    .trim()
    .replace(/^\||\|$/g, '')
    .split(/(?<!\\)\|/)
    .map((c) => c.trim());
  return cells.length === COLUMNS.length ? `${cells[0]}\u0000${cells[5]}` : undefined;
};
const keyOf = (r: CurrentRow) => `${cell(r.figure)}\u0000${cell(r.layout)}`;

/**
 * Replaces the rows of `rows` (same figure and layout) in the table between
 * the markers of `file`, appends the new ones at its end, and keeps every
 * other line. A file without the markers gets the table at its top. Written
 * through a rename, so a reader never sees half a file.
 */
export function updateCurrentFigures(rows: readonly CurrentRow[], file = CURRENT_FILE): string {
  const old = existsSync(file) ? readFileSync(file, 'utf8') : '';
  const start = old.indexOf(CURRENT_START);
  const end = old.indexOf(CURRENT_END);
  const header = [`| ${COLUMNS.join(' | ')} |`, `|${COLUMNS.map((_, i) => (i >= 1 && i <= 4 ? '---:' : '---')).join('|')}|`];
  let before: string;
  let after: string;
  let table: string[];
  if (start >= 0 && end > start) {
    before = old.slice(0, start);
    after = old.slice(end + CURRENT_END.length);
    table = old
      .slice(start + CURRENT_START.length, end)
      .split('\n')
      .filter((l) => l.trim() !== '');
  } else {
    before = '';
    after = old ? `\n\n${old.replace(/^\n+/, '')}` : '\n';
    table = header;
  }
  const fresh = new Map(rows.map((r) => [keyOf(r), r]));
  const kept = table.map((l) => {
    const k = keyOfLine(l);
    const r = k === undefined ? undefined : fresh.get(k);
    if (!r) return l;
    fresh.delete(k!);
    return line(r);
  });
  const text = `${before}${CURRENT_START}\n${[...kept, ...[...fresh.values()].map(line)].join('\n')}\n${CURRENT_END}${after}`;
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, text);
  renameSync(tmp, file);
  return file;
}
