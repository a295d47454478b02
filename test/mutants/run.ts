// Runs the seeded mutants (mutants.ts): copies the tree to a scratch
// directory per lane (HEAD by default; MUTANTS_FROM=tests for HEAD with the
// working tree's test/, =worktree for the working tree's files), then per
// mutant replaces its text, runs the model suites it names with the seeds and
// run counts CI uses (no MODEL_* variable passes through) and its integration
// files, puts the text back, and prints a table; the last line is
// `mutants: model K/N, integration K/N`. The checkout it runs from is never
// written. A mutant whose text does not occur exactly once stops the run
// before anything starts.
//
// npm run test:mutants [-- M1 M4 ... | --all] [-- --model-only | --integration-only] [-- --jobs N]
// (no ids: the required set, the score CI's seeds are held to; --all: the whole list)
// npm run test:mutants -- --unmutated [orders ...]   the suites without a mutant: pass, time, summary
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { MODEL_SUITES, MUTANTS, type ModelSuite, type Mutant } from './mutants.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
/** A model suite that has not failed by then is taken as survived (CI's four take about 5 minutes together). */
const MODEL_LIMIT_MS = 8 * 60_000;
const INTEGRATION_LIMIT_MS = 6 * 60_000;

/** `error`: the suite ended without a verdict (it did not start, or stopped another way): neither a kill nor a survival. */
type Outcome = { killed: boolean; by: string; ms: number; error?: boolean };
type Row = { m: Mutant; model?: Outcome; integration?: Outcome };

/** An integration file by its name (`notifications.faults`), wherever under test/integration/ it lives; a name that is not there stops the run. */
function integrationFile(name: string): string {
  const found = readdirSync(join(ROOT, 'test/integration'), { recursive: true, encoding: 'utf8' }).filter((f) => f.split('/').pop() === `${name}.test.ts`);
  if (found.length !== 1) throw new Error(`integration file ${name}.test.ts: found ${found.length} under test/integration/`);
  return `test/integration/${found[0]}`;
}

/** How many times `find` occurs in `text`. */
export function occurrences(text: string, find: string): number {
  let n = 0;
  for (let i = text.indexOf(find); i !== -1; i = text.indexOf(find, i + 1)) n++;
  return n;
}

/**
 * A copy of the tracked tree with the checkout's node_modules and generated
 * client beside it: HEAD's files (`head`), HEAD's with the working tree's
 * test/ over them (`tests`: suites being changed, against committed code), or
 * the working tree's (`worktree`).
 */
function scratchTree(from: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'ots-mutants-'));
  const copy = (paths: string[]) => {
    const files = execFileSync('git', ['ls-files', '-z', '-c', '-o', '--exclude-standard', '--', ...paths], { cwd: ROOT, encoding: 'utf8' });
    for (const f of files.split('\0').filter(Boolean)) {
      rmSync(join(dir, f), { force: true });
      mkdirSync(dirname(join(dir, f)), { recursive: true });
      try {
        cpSync(join(ROOT, f), join(dir, f));
      } catch {
        // Deleted in the working tree, not yet from the index: absent from the copy too.
      }
    }
  };
  if (from === 'worktree') copy([]);
  else {
    execFileSync('sh', ['-c', `git -C "${ROOT}" archive HEAD | tar -x -C "${dir}"`]);
    if (from === 'tests') copy(['test']);
    else if (from !== 'head') throw new Error(`MUTANTS_FROM: head, tests or worktree, not ${from}`);
  }
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
  cpSync(join(ROOT, 'src/generated'), join(dir, 'src/generated'), { recursive: true });
  return dir;
}

/** Refuses the list when a mutant's text is not found exactly once in the copy. */
function validate(dir: string, list: readonly Mutant[]): void {
  const bad = list.flatMap((m) => {
    const n = occurrences(readFileSync(join(dir, m.file), 'utf8'), m.find);
    return n === 1 ? [] : [`${m.id}: its text occurs ${n} times in ${m.file}`];
  });
  if (bad.length) throw new Error(`mutants out of date (fix test/mutants/mutants.ts):\n  ${bad.join('\n  ')}`);
}

/** Every process below `root`, found through `ps` while they still have their parents. */
function descendants(root: number): number[] {
  const children = new Map<number, number[]>();
  for (const line of execFileSync('ps', ['-eo', 'pid=,ppid='], { encoding: 'utf8' }).split('\n')) {
    const [pid, ppid] = line.trim().split(/\s+/).map(Number);
    if (pid && ppid) children.set(ppid, [...(children.get(ppid) ?? []), pid]);
  }
  const found: number[] = [];
  for (let todo = [root]; todo.length;) {
    const next = children.get(todo.pop() as number) ?? [];
    found.push(...next);
    todo.push(...next);
  }
  return found;
}

/** Runs a vitest command in `dir`; `killedBy` finds a failure in its output (the run is stopped at the first). */
function vitest(dir: string, args: string[], limitMs: number, killedBy: (out: string) => string | null): Promise<{ by: string | null; out: string }> {
  const env = { ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('MODEL_'))), NO_COLOR: '1', FORCE_COLOR: '0' };
  return new Promise((done) => {
    const child: ChildProcess = spawn(join(dir, 'node_modules/.bin/vitest'), ['run', ...args], {
      cwd: dir,
      env,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let by: string | null = null;
    // The whole tree: the suite's service processes, Redis and receivers end
    // with it (the group alone missed processes that left it).
    const stop = () => {
      for (const pid of [...descendants(child.pid as number), -(child.pid as number)]) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
    };
    const timer = setTimeout(stop, limitMs);
    const onData = (d: Buffer) => {
      out += d.toString().replace(/\x1b\[[0-9;]*m/g, '');
      if (by === null && (by = killedBy(out)) !== null) stop();
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    child.on('close', (code) => {
      clearTimeout(timer);
      if (by === null && code !== 0) by = killedBy(out) ?? (code === null ? `stopped after ${limitMs / 60_000} min` : `exited ${code} without a failed run`);
      done({ by, out });
    });
  });
}

async function runModel(dir: string, m: Mutant): Promise<Outcome> {
  const t0 = Date.now();
  for (const suite of m.model) {
    // The runner says a run failed before fast-check starts shrinking: that is the kill.
    const r = await vitest(dir, ['--config', 'vitest.model.config.ts', `test/model/${suite}.model.test.ts`], MODEL_LIMIT_MS, (out) => {
      const f = new RegExp(`model suite ${suite} \\(seed \\d+\\) failed after (\\d+) runs`).exec(out);
      return f ? `${suite}, run ${Number(f[1]) + 1}` : null;
    });
    if (r.by?.startsWith(suite)) return { killed: true, by: r.by, ms: Date.now() - t0 };
    if (r.by !== null) return { killed: false, error: true, by: `${suite}: ${r.by}`, ms: Date.now() - t0 };
  }
  return { killed: false, by: m.model.join(', '), ms: Date.now() - t0 };
}

async function runIntegration(dir: string, m: Mutant): Promise<Outcome> {
  const t0 = Date.now();
  const files = m.integration.map(integrationFile);
  const r = await vitest(dir, ['--bail=1', ...files], INTEGRATION_LIMIT_MS, (out) => /^ *FAIL +(.*)$/m.exec(out)?.[1]?.trim() ?? null);
  return { killed: r.by !== null, by: r.by ?? m.integration.join(', '), ms: Date.now() - t0 };
}

const fmt = (o: Outcome | undefined) => (o ? `${o.killed ? 'killed' : o.error ? 'ERROR' : 'SURVIVED'} (${o.by}; ${Math.round(o.ms / 1000)} s)` : 'not run');

/** The suites on the unmutated copy, for their run time and that they pass at CI's seeds. */
async function unmutated(dir: string, suites: readonly ModelSuite[]): Promise<void> {
  for (const suite of suites) {
    const t0 = Date.now();
    const r = await vitest(dir, ['--config', 'vitest.model.config.ts', `test/model/${suite}.model.test.ts`], MODEL_LIMIT_MS, (out) =>
      / failed after \d+ runs/.test(out) ? 'failed' : null,
    );
    const summary = /^\{"suite".*$/m.exec(r.out)?.[0] ?? '';
    console.log(`${suite}: ${r.by ?? 'passed'} in ${Math.round((Date.now() - t0) / 1000)} s ${summary}`);
    if (r.by) console.log(r.out.slice(-4_000));
  }
}

/** Applies `m` to the copy in `dir`, runs its suites, puts the text back. */
async function runMutant(dir: string, m: Mutant, args: string[]): Promise<Row> {
  const path = join(dir, m.file);
  const original = readFileSync(path, 'utf8');
  writeFileSync(
    path,
    original.replace(m.find, () => m.replace),
  );
  const row: Row = { m };
  try {
    if (!args.includes('--integration-only') && m.model.length) row.model = await runModel(dir, m);
    if (!args.includes('--model-only') && m.integration.length) row.integration = await runIntegration(dir, m);
  } finally {
    writeFileSync(path, original);
  }
  console.log(`${m.id}: model ${fmt(row.model)}; integration ${fmt(row.integration)}`);
  return row;
}

/**
 * Mutants run side by side in this many lanes (`--jobs N`, default 2): the
 * suites wait on timers and I/O more than they compute, and each starts its
 * own Redis, database and ports, so two lanes fit a 2-core machine.
 */
function jobCount(args: string[]): number {
  const i = args.indexOf('--jobs');
  const n = i === -1 ? 2 : Number(args[i + 1]);
  if (!Number.isInteger(n) || n < 1) throw new Error(`--jobs takes a whole number of lanes, not ${args[i + 1]}`);
  return n;
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  if (args.includes('--unmutated')) {
    const named = MODEL_SUITES.filter((x) => args.includes(x));
    const dir = scratchTree(process.env.MUTANTS_FROM ?? 'head');
    try {
      return await unmutated(dir, named.length ? named : MODEL_SUITES);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
  const only = args.filter((a, i) => !a.startsWith('--') && args[i - 1] !== '--jobs');
  const list = only.length ? MUTANTS.filter((m) => only.includes(m.id)) : args.includes('--all') ? MUTANTS : MUTANTS.filter((m) => m.required);
  if (only.length && list.length !== only.length) throw new Error(`unknown mutant among ${only.join(' ')}`);
  const jobs = jobCount(args);
  // One scratch tree per lane: a lane mutates its own copy, never another's.
  const dirs = Array.from({ length: Math.min(jobs, list.length) || 1 }, () => scratchTree(process.env.MUTANTS_FROM ?? 'head'));
  const cleanup = () => dirs.forEach((d) => rmSync(d, { recursive: true, force: true }));
  process.on('SIGINT', () => {
    cleanup();
    process.exit(130);
  });
  const started = Date.now();
  const rows: Row[] = [];
  try {
    validate(dirs[0] as string, list);
    let next = 0;
    const lane = async (dir: string) => {
      for (let i = next++; i < list.length; i = next++) rows[i] = await runMutant(dir, list[i] as Mutant, args);
    };
    await Promise.all(dirs.map(lane));
  } finally {
    cleanup();
  }
  console.log('\n| id | rule | model (CI seeds) | integration |\n|---|---|---|---|');
  for (const r of rows) console.log(`| ${r.m.id}${r.m.required ? '' : ' (added)'} | ${r.m.rule} | ${fmt(r.model)} | ${fmt(r.integration)} |`);
  const score = (pick: (r: Row) => Outcome | undefined, set: Row[]) => {
    const ran = set.filter((r) => pick(r));
    return `${ran.filter((r) => pick(r)?.killed).length}/${ran.length}`;
  };
  const required = rows.filter((r) => r.m.required);
  console.log(`\nrun time ${Math.round((Date.now() - started) / 60_000)} min`);
  console.log(`required mutants: model ${score((r) => r.model, required)}, integration ${score((r) => r.integration, required)}`);
  console.log(`mutants: model ${score((r) => r.model, rows)}, integration ${score((r) => r.integration, rows)}`);
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(2);
});
