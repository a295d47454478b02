// Where a Node process spent its CPU: the self time of a `--cpu-prof`
// profile by function and by package (or src/ folder), optionally cut to a
// window of the machine's monotonic clock (the profile's timestamps and
// process.hrtime share it on Linux), so a benchmark can summarise one phase
// of a longer-running process. Also a command: `tsx bench/cpu-profile-top.ts <file.cpuprofile> [top]`.
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

type CallFrame = { functionName: string; url: string; lineNumber: number };
type CpuProfile = {
  nodes: { id: number; callFrame: CallFrame; children?: number[] }[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
};

export type ProfileTop = {
  /** The samples' span (ms) and how much of it was idle, garbage collection, or V8's own (program). */
  sampledMs: number;
  idlePct: number;
  gcPct: number;
  programPct: number;
  /** Busy time: everything but idle. */
  busyMs: number;
  /** Functions by self time, share of the busy time. */
  functions: { fn: string; where: string; selfMs: number; busyPct: number }[];
  /** Packages (node_modules), src/ folders and Node's internals by self time, share of the busy time. */
  modules: { module: string; selfMs: number; busyPct: number }[];
  /**
   * The same with the time of Node's internals and native code (socket
   * writes, JSON, crypto) charged to the package or src/ folder that called
   * them: whose work it was.
   */
  owners: { module: string; selfMs: number; busyPct: number }[];
};

const SPECIAL = new Set(['(idle)', '(garbage collector)', '(program)', '(root)']);

/** The package, src/ folder or Node internal a script URL belongs to. */
export function moduleOf(url: string, fn: string): string {
  if (!url) return SPECIAL.has(fn) ? fn : '(native)';
  const nm = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (nm) return nm[1] as string;
  const src = /\/(src|bench)\/((?:[^/]+\/)?)/.exec(url);
  if (src) return `${src[1]}/${src[2] ?? ''}`.replace(/\/$/, '');
  if (url.startsWith('node:')) return url.split('/').slice(0, 2).join('/');
  return url;
}

const shortWhere = (url: string, line: number) =>
  url ? `${url.replace(/^.*?\/(node_modules|src|bench)\//, '$1/').replace(/^file:\/\//, '')}:${line + 1}` : '';

/**
 * Self time by function and module over the samples whose timestamps (µs of
 * the monotonic clock) fall within [fromUs, toUs]; the whole profile without them.
 */
export function profileTop(file: string, top = 15, window?: { fromUs: number; toUs: number }): ProfileTop {
  const p = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const frames = new Map(p.nodes.map((n) => [n.id, n.callFrame]));
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  /** The module of the nearest frame up the stack that is neither native nor Node's own. */
  const ownerOf = (id: number): string => {
    const f = frames.get(id) as CallFrame;
    if (SPECIAL.has(f.functionName)) return f.functionName;
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const url = frames.get(at)?.url ?? '';
      if (url && !url.startsWith('node:')) return moduleOf(url, '');
    }
    return moduleOf(f.url, f.functionName);
  };
  const owners = new Map<string, number>();
  const byFn = new Map<string, { fn: string; where: string; module: string; us: number }>();
  let t = p.startTime;
  let sampled = 0;
  const special = { '(idle)': 0, '(garbage collector)': 0, '(program)': 0 } as Record<string, number>;
  for (let i = 0; i < p.samples.length; i++) {
    t += p.timeDeltas[i] ?? 0;
    // A sample stands for the time until the next one.
    const us = Math.max(0, (p.timeDeltas[i + 1] ?? 0) || 0);
    if (window && (t < window.fromUs || t > window.toUs)) continue;
    const f = frames.get(p.samples[i] as number);
    if (!f) continue;
    sampled += us;
    const fn = f.functionName || '(anonymous)';
    if (fn in special) special[fn] = (special[fn] ?? 0) + us;
    const key = `${fn}\u0000${f.url}\u0000${f.lineNumber}`;
    const e = byFn.get(key) ?? { fn, where: shortWhere(f.url, f.lineNumber), module: moduleOf(f.url, fn), us: 0 };
    e.us += us;
    byFn.set(key, e);
    if (fn !== '(idle)') {
      const o = ownerOf(p.samples[i] as number);
      owners.set(o, (owners.get(o) ?? 0) + us);
    }
  }
  const idle = special['(idle)'] ?? 0;
  const busy = sampled - idle;
  const pct = (us: number, of: number) => (of > 0 ? Math.round((1_000 * us) / of) / 10 : 0);
  const ms = (us: number) => Math.round(us / 100) / 10;
  const busyOnes = [...byFn.values()].filter((e) => e.fn !== '(idle)');
  const modules = new Map<string, number>();
  for (const e of busyOnes) modules.set(e.module, (modules.get(e.module) ?? 0) + e.us);
  const ranked = (m: Map<string, number>) =>
    [...m.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([module, us]) => ({ module, selfMs: ms(us), busyPct: pct(us, busy) }));
  return {
    sampledMs: ms(sampled),
    idlePct: pct(idle, sampled),
    gcPct: pct(special['(garbage collector)'] ?? 0, sampled),
    programPct: pct(special['(program)'] ?? 0, sampled),
    busyMs: ms(busy),
    functions: busyOnes
      .sort((a, b) => b.us - a.us)
      .slice(0, top)
      .map((e) => ({ fn: e.fn, where: e.where, selfMs: ms(e.us), busyPct: pct(e.us, busy) })),
    modules: ranked(modules),
    owners: ranked(owners),
  };
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const [file, n] = process.argv.slice(2);
  if (!file) {
    process.stderr.write('usage: tsx bench/cpu-profile-top.ts <file.cpuprofile> [top]\n');
    process.exit(2);
  }
  process.stdout.write(`${JSON.stringify(profileTop(file, Number(n ?? 15)), null, 2)}\n`);
}
