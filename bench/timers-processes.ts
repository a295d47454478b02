// The timers benchmark's worker process and the CPU it watches. The API runs
// through http-harness.ts (`src/main.ts api`, waited for on /readyz); the
// worker role serves no HTTP, so it is started here (`src/main.ts worker`)
// and is up once it logs "service started" (info, the default level).
import { type ChildProcess, spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import type { Redis } from 'ioredis';
import { processCpuSeconds, redisCpuSeconds } from './bench-util.js';
import { type Log, ROOT, sleep } from './http-harness.js';
import { postgresCpuSeconds } from './pg-util.js';

export type Worker = { readonly child: ChildProcess; stop(): Promise<number | null> };

/** Starts `node [nodeArgs] --import tsx src/main.ts worker` with `env`; resolves once it logged "service started". */
export async function startWorker(env: Record<string, string>, nodeArgs: string[], log: Log): Promise<Worker> {
  const child = spawn(process.execPath, [...nodeArgs, '--import', 'tsx', 'src/main.ts', 'worker'], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  let started = false;
  const forward = (chunk: Buffer) => {
    const text = chunk.toString();
    if (text.includes('"service started"')) started = true;
    process.stderr.write(text.replace(/^(?=.)/gm, '  [worker] '));
  };
  child.stdout?.on('data', forward);
  child.stderr?.on('data', forward);
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
    child.kill('SIGTERM');
    let timer: NodeJS.Timeout | undefined;
    const code = await Promise.race([exited, new Promise<'timeout'>((r) => (timer = setTimeout(() => r('timeout'), 20_000)))]);
    clearTimeout(timer);
    if (code !== 'timeout') return code;
    log('the worker did not stop within 20 s of SIGTERM: sending SIGKILL');
    child.kill('SIGKILL');
    return exited;
  };
  const deadline = Date.now() + 60_000;
  while (!started) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`the worker exited during start-up (code ${child.exitCode})`);
    if (Date.now() > deadline) {
      await stop();
      throw new Error('the worker did not start within 60 s');
    }
    await sleep(50);
  }
  return { child, stop };
}

/** The pid of the process whose command is `comm` (the first found), for a broker on this machine. */
export function pidOf(comm: string): number | null {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/comm`, 'utf8').trim() === comm) return Number(entry);
    } catch {
      // gone meanwhile
    }
  }
  return null;
}

/** The machine's busy and total CPU ticks so far (/proc/stat), busy being all but idle and iowait. */
function machineTicks(): { busy: number; total: number } | null {
  try {
    const f = readFileSync('/proc/stat', 'utf8').split('\n')[0]?.trim().split(/\s+/).slice(1).map(Number) ?? [];
    const total = f.slice(0, 8).reduce((a, b) => a + b, 0);
    return { busy: total - (f[3] ?? 0) - (f[4] ?? 0), total };
  } catch {
    return null;
  }
}

/** CPU seconds each part has used so far, null where it is not on this machine; the machine's ticks. */
export type CpuMark = { at: number; parts: Record<string, number | null>; machine: { busy: number; total: number } | null };

export async function cpuMark(pids: Record<string, number | null | undefined>, dbUrl: string, redis: Redis): Promise<CpuMark> {
  const parts: Record<string, number | null> = {};
  for (const [name, pid] of Object.entries(pids)) parts[name] = pid ? processCpuSeconds(pid) : null;
  parts.postgres = await postgresCpuSeconds(dbUrl);
  parts.redis = await redisCpuSeconds(redis);
  const own = process.cpuUsage();
  parts.bench = (own.user + own.system) / 1e6;
  return { at: performance.now(), parts, machine: machineTicks() };
}

/** Each part's CPU between two marks as % of one core, and the whole machine's busy share in cores. */
export function cpuShare(from: CpuMark, to: CpuMark): Record<string, number | null> {
  const s = (to.at - from.at) / 1_000;
  const out: Record<string, number | null> = {};
  for (const [name, v] of Object.entries(to.parts)) {
    const a = from.parts[name];
    out[name] = v === null || a === null || a === undefined || s <= 0 ? null : Math.round(((v - a) / s) * 1_000) / 10;
  }
  const m0 = from.machine;
  const m1 = to.machine;
  out.machineCores = m0 && m1 && m1.total > m0.total ? Math.round(((m1.busy - m0.busy) / (m1.total - m0.total)) * os.cpus().length * 100) / 100 : null;
  return out;
}
