// docs/configuration.md against src/config.ts: every variable of the config
// schema has its row, the page names no variable the schema lacks, and each
// row's default is the one the schema gives. The variables are read from the
// source (config.ts exports no schema): the UPPER_CASE property names of every
// object literal handed to z.object / z.strictObject / .extend in that file.
import { readFileSync } from 'node:fs';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';

const CONFIG = new URL('../../src/config.ts', import.meta.url);
const DOC = new URL('../../docs/configuration.md', import.meta.url);
const VARIABLE = /^[A-Z][A-Z0-9_]*$/;

/** The environment variables of config.ts's schema, in source order. */
function schemaVariables(source: string): string[] {
  const file = ts.createSourceFile('config.ts', source, ts.ScriptTarget.Latest, true);
  const names: string[] = [];
  const visit = (node: ts.Node): void => {
    if (
      ts.isCallExpression(node) &&
      ts.isPropertyAccessExpression(node.expression) &&
      ['object', 'strictObject', 'extend'].includes(node.expression.name.text)
    ) {
      const arg = node.arguments[0];
      if (arg && ts.isObjectLiteralExpression(arg)) {
        for (const p of arg.properties) {
          const name = p.name && (ts.isIdentifier(p.name) || ts.isStringLiteral(p.name)) ? p.name.text : undefined;
          if (name && VARIABLE.test(name) && !names.includes(name)) names.push(name);
        }
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(file);
  return names;
}

/** The rows of the page's tables whose first cell is one `VARIABLE`: name -> the default cell. */
function documentedVariables(markdown: string): Map<string, string> {
  const rows = new Map<string, string>();
  for (const line of markdown.split('\n')) {
    const cells = line.trim().startsWith('|')
      ? line
          .trim()
          .slice(1, -1)
          .split('|')
          .map((c) => c.trim())
      : [];
    const name = /^`([A-Z][A-Z0-9_]*)`$/.exec(cells[0] ?? '')?.[1];
    if (!name) continue;
    if (rows.has(name)) throw new Error(`docs/configuration.md: ${name} has two rows`);
    rows.set(name, cells[1] ?? '');
  }
  return rows;
}

/** A default as the page writes it: `value`, "unset", or "empty" (a list). */
function shownDefault(value: unknown): string {
  if (value === undefined) return 'unset';
  if (Array.isArray(value) && value.length === 0) return 'empty';
  return `\`${Array.isArray(value) ? value.join(',') : String(value)}\``;
}

describe('docs/configuration.md', () => {
  const variables = schemaVariables(readFileSync(CONFIG, 'utf8'));
  const documented = documentedVariables(readFileSync(DOC, 'utf8'));

  it('finds the schema in src/config.ts', () => {
    // A parse that found nothing would make the checks below pass vacuously.
    expect(variables.length).toBeGreaterThan(20);
    expect(variables).toContain('REDIS_URL');
  });

  it('has a row for every variable of the config schema', () => {
    expect(variables.filter((v) => !documented.has(v))).toEqual([]);
  });

  it('names no variable the config schema lacks', () => {
    expect([...documented.keys()].filter((v) => !variables.includes(v))).toEqual([]);
  });

  it("gives each variable the schema's default", () => {
    const defaults = loadConfig({}) as Record<string, unknown>;
    const wrong = variables.filter((v) => documented.has(v) && documented.get(v) !== shownDefault(defaults[v]));
    expect(wrong.map((v) => `${v}: page ${documented.get(v)}, schema ${shownDefault(defaults[v])}`)).toEqual([]);
  });
});
