// The delivery row is written by one room only: src/core/delivery/. Every
// other file of src/ reads the table or embeds the room's fragments; a
// statement that changes a row elsewhere, or a raw statement built from a
// string, fails here.
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

const SRC = join(import.meta.dirname, '..', '..', 'src');
const ROOM = join(SRC, 'core', 'delivery');

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return name === 'generated' ? [] : sources(path);
    return name.endsWith('.ts') ? [path] : [];
  });
}

/** A write of the notifications table: SQL, or the Prisma model API. */
const WRITES = [
  /\bUPDATE\s+notifications\b/i,
  /\bINSERT\s+INTO\s+notifications\b/i,
  /\bDELETE\s+FROM\s+notifications\b/i,
  /\.notification\s*\.\s*(create|createMany|update|updateMany|upsert|delete|deleteMany)\b/,
];

describe('the delivery room', () => {
  it('is the only place that writes a delivery row', () => {
    const outside = sources(SRC).filter((f) => !f.startsWith(ROOM + '/'));
    expect(outside.length).toBeGreaterThan(50);
    const offenders = outside.flatMap((f) => {
      const text = readFileSync(f, 'utf8');
      return WRITES.filter((re) => re.test(text)).map((re) => `${relative(SRC, f)}: ${re.source}`);
    });
    expect(offenders).toEqual([]);
  });

  it('holds every writing statement of the table (the check above has something to find)', () => {
    const inside = sources(ROOM)
      .map((f) => readFileSync(f, 'utf8'))
      .join('\n');
    for (const re of WRITES.slice(0, 3)) expect(inside).toMatch(re);
  });

  it('names each of its files in its README, each transition with its guard and lock order in a header', () => {
    const readme = readFileSync(join(ROOM, 'README.md'), 'utf8');
    for (const f of readdirSync(ROOM).filter((n) => n.endsWith('.ts'))) {
      expect(readme, f).toContain(`\`${f}\``);
      if (f === 'index.ts' || f === 'contract.ts') continue;
      const header = readFileSync(join(ROOM, f), 'utf8').split('\nimport ')[0]!;
      expect(header, f).toMatch(/Guard:/);
      expect(header, f).toMatch(/Lock order:/);
    }
  });
});

describe("the domains' sql parts", () => {
  it('give every writing statement a header with its guard and lock order', () => {
    const modules = join(SRC, 'modules');
    const parts = readdirSync(modules)
      .map((m) => join(modules, m, 'sql'))
      .filter((d) => statSync(d, { throwIfNoEntry: false })?.isDirectory());
    expect(parts.length).toBeGreaterThanOrEqual(3);
    const writing = /\b(UPDATE\s+\w+\s+SET|INSERT\s+INTO|DELETE\s+FROM)\b|\.(upsert|create|update|delete)(Many)?\(/;
    const files = parts.flatMap(sources).filter((f) => writing.test(readFileSync(f, 'utf8')));
    expect(files.length).toBeGreaterThan(5);
    for (const f of files) {
      const header = readFileSync(f, 'utf8').split('\nimport ')[0]!;
      expect(header, relative(SRC, f)).toMatch(/Guard:/);
      expect(header, relative(SRC, f)).toMatch(/Lock order:/);
    }
  });
});

describe('raw SQL in src/', () => {
  it('is tagged Prisma.sql: no statement built from a string', () => {
    const offenders = sources(SRC)
      .filter((f) => /\$(queryRawUnsafe|executeRawUnsafe)\b/.test(readFileSync(f, 'utf8')))
      .map((f) => relative(SRC, f));
    expect(offenders).toEqual([]);
  });
});
