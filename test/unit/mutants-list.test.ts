// The seeded mutants (test/mutants/mutants.ts) name exact texts of the
// product; a change that moves one must update the list in the same commit,
// or `npm run test:mutants` refuses to start. Checked here so `npm test`
// catches it, not the next mutant run.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { MUTANTS } from '../mutants/mutants.js';

const count = (text: string, find: string) => text.split(find).length - 1;

describe('the mutants list', () => {
  it.each(MUTANTS.map((m) => [m.id, m] as const))('%s finds its text exactly once', (_id, m) => {
    expect(count(readFileSync(join(process.cwd(), m.file), 'utf8'), m.find)).toBe(1);
  });

  it('gives every mutant a unique id', () => {
    expect(new Set(MUTANTS.map((m) => m.id)).size).toBe(MUTANTS.length);
  });
});
