// The benchmarks' writer of BENCHMARKS.md's current-figures table, on scratch
// copies: a run replaces its rows (by figure and layout), keeps every other
// line, and appends figures the table did not have.
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CURRENT_END, CURRENT_START, type CurrentRow, updateCurrentFigures } from '../../bench/current-figures.js';
import { QUEUE_FIGURES } from '../../bench/report.js';

const dir = mkdtempSync(join(tmpdir(), 'ots-current-figures-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const row = (over: Partial<CurrentRow>): CurrentRow => ({
  figure: QUEUE_FIGURES.enqueue,
  ours: '123 456',
  bullmq: '20 000',
  layout: 'one HASH',
  measured: '2026-12-01, Test CPU, 2 cores',
  commit: 'abc1234',
  command: '`npm run bench`',
  ...over,
});

const tableOf = (text: string) =>
  text
    .slice(text.indexOf(CURRENT_START), text.indexOf(CURRENT_END))
    .split('\n')
    .filter((l) => l !== '');

describe('updateCurrentFigures', () => {
  it('replaces the row of the same figure and layout in BENCHMARKS.md and keeps every other line', () => {
    const file = join(dir, 'BENCHMARKS.md');
    copyFileSync(new URL('../../BENCHMARKS.md', import.meta.url), file);
    const before = readFileSync(file, 'utf8');
    updateCurrentFigures([row({})], file);
    const after = readFileSync(file, 'utf8');
    const changed = tableOf(after).filter((l) => !tableOf(before).includes(l));
    expect(changed).toEqual([
      `| ${QUEUE_FIGURES.enqueue} | 123 456 | 20 000 | — | — | one HASH | 2026-12-01, Test CPU, 2 cores | abc1234 | \`npm run bench\` |`,
    ]);
    expect(tableOf(after)).toHaveLength(tableOf(before).length);
    // Outside the table nothing moves.
    expect(after.slice(0, after.indexOf(CURRENT_START))).toBe(before.slice(0, before.indexOf(CURRENT_START)));
    expect(after.slice(after.indexOf(CURRENT_END))).toBe(before.slice(before.indexOf(CURRENT_END)));
  });

  it('keeps a row of the same figure in another layout, and appends a figure the table lacks', () => {
    const file = join(dir, 'two-layouts.md');
    copyFileSync(new URL('../../BENCHMARKS.md', import.meta.url), file);
    const before = tableOf(readFileSync(file, 'utf8'));
    updateCurrentFigures([row({ layout: 'record groups' }), row({ figure: 'A new figure (ms)', ours: '1 | 2' })], file);
    const after = tableOf(readFileSync(file, 'utf8'));
    expect(after.slice(0, before.length)).toEqual(before);
    expect(after.slice(before.length)).toEqual([
      expect.stringContaining(`| ${QUEUE_FIGURES.enqueue} | 123 456 | 20 000 | — | — | record groups |`),
      expect.stringContaining('| A new figure (ms) | 1 \\| 2 |'),
    ]);
    // Written again, the same rows are replaced, not added.
    updateCurrentFigures([row({ layout: 'record groups', ours: '7' })], file);
    const again = tableOf(readFileSync(file, 'utf8'));
    expect(again).toHaveLength(after.length);
    expect(again.filter((l) => l.includes('| record groups |') && l.startsWith(`| ${QUEUE_FIGURES.enqueue} |`))).toEqual([
      expect.stringContaining(`| ${QUEUE_FIGURES.enqueue} | 7 |`),
    ]);
  });

  it('puts the table at the top of a file without its markers', () => {
    const file = join(dir, 'plain.md');
    writeFileSync(file, '# Benchmarks\n\nSome text.\n');
    updateCurrentFigures([row({})], file);
    const text = readFileSync(file, 'utf8');
    expect(text.startsWith(CURRENT_START)).toBe(true);
    expect(text).toContain('| Figure | Ours | BullMQ |');
    expect(text.trimEnd().endsWith('Some text.')).toBe(true);
  });
});
