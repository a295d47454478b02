// Small helpers shared by the benchmark's parts: percentiles, Redis INFO and
// memory figures, and deleting a run's own keys (SCAN is fine in a benchmark,
// and FLUSHDB is not: other tests share this Redis).
import { readFileSync, readdirSync } from 'node:fs';
import { Redis } from 'ioredis';

/** The 20-byte payload every job carries: JSON `{"p":"abcdefghijkl"}`. */
export const PAYLOAD = { p: 'abcdefghijkl' } as const;

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export const round = (n: number, digits = 1): number => {
  const f = 10 ** digits;
  return Math.round(n * f) / f;
};

export type Percentiles = { count: number; min: number; p50: number; p99: number; p999: number; max: number; mean: number };

/** Nearest-rank percentiles of `samples` (sorted in place). */
export function percentiles(samples: number[]): Percentiles | null {
  if (samples.length === 0) return null;
  samples.sort((a, b) => a - b);
  const at = (q: number) => samples[Math.min(samples.length - 1, Math.max(0, Math.ceil(q * samples.length) - 1))] as number;
  const mean = samples.reduce((a, b) => a + b, 0) / samples.length;
  return {
    count: samples.length,
    min: round(samples[0] as number, 2),
    p50: round(at(0.5), 2),
    p99: round(at(0.99), 2),
    p999: round(at(0.999), 2),
    max: round(samples[samples.length - 1] as number, 2),
    mean: round(mean, 2),
  };
}

/** `runs` timings (ms) of `f`, after one untimed call: p50 and max (nearest rank, as percentiles()). */
export async function timed(runs: number, f: () => Promise<unknown>): Promise<{ p50Ms: number; maxMs: number }> {
  await f();
  const ms: number[] = [];
  for (let i = 0; i < runs; i++) {
    const s = performance.now();
    await f();
    ms.push(performance.now() - s);
  }
  const p = percentiles(ms);
  return { p50Ms: p?.p50 ?? 0, maxMs: p?.max ?? 0 };
}

export async function infoField(redis: Redis, section: string, field: string): Promise<string | null> {
  const text = await redis.info(section);
  const m = new RegExp(`^${field}:(.*)$`, 'm').exec(text);
  return m ? (m[1] as string).trim() : null;
}

export async function usedMemory(redis: Redis): Promise<number> {
  return Number(await infoField(redis, 'memory', 'used_memory'));
}

/** The Redis server's CPU time so far (user + system), seconds, from INFO cpu: what its work cost, whatever the clients' pace. */
export async function redisCpuSeconds(redis: Redis): Promise<number> {
  const info = await redis.info('cpu');
  const field = (f: string) => Number(new RegExp(`^${f}:([0-9.]+)`, 'm').exec(info)?.[1] ?? Number.NaN);
  return field('used_cpu_user') + field('used_cpu_sys');
}

async function scanKeys(redis: Redis, match: string, each: (keys: string[]) => Promise<void>): Promise<void> {
  const stream = redis.scanStream({ match, count: 1000 });
  for await (const keys of stream as AsyncIterable<string[]>) {
    if (keys.length) await each(keys);
  }
}

/** Sum of MEMORY USAGE over the keys matching `match`: unlike used_memory, blind to other clients' keys. */
export async function keysMemory(redis: Redis, match: string): Promise<{ keys: number; bytes: number }> {
  let keys = 0;
  let bytes = 0;
  await scanKeys(redis, match, async (batch) => {
    const p = redis.pipeline();
    for (const k of batch) p.memory('USAGE', k, 'SAMPLES', 0);
    const res = (await p.exec()) ?? [];
    for (const [err, v] of res) if (!err) bytes += Number(v ?? 0);
    keys += batch.length;
  });
  return { keys, bytes };
}

/** UNLINKs every key matching `match`; returns how many. */
export async function deleteKeys(redis: Redis, match: string): Promise<number> {
  let n = 0;
  await scanKeys(redis, match, async (batch) => {
    n += Number(await redis.unlink(...batch));
  });
  return n;
}

/** Runs `fn` on a short-lived connection of its own (works after the queue closed). */
async function withRedis<T>(redisUrl: string, fn: (r: Redis) => Promise<T>): Promise<T> {
  const r = new Redis(redisUrl, { connectionName: 'bench-admin', maxRetriesPerRequest: null });
  try {
    return await fn(r);
  } finally {
    r.disconnect();
  }
}

/** UNLINKs every key matching any of `patterns`; returns how many. */
export function dropKeys(redisUrl: string, ...patterns: string[]): Promise<number> {
  return withRedis(redisUrl, async (r) => {
    let n = 0;
    for (const p of patterns) n += await deleteKeys(r, p);
    return n;
  });
}

/** keysMemory over a connection of its own, in the shape of BenchQueue.storage(). */
export function keysStorage(redisUrl: string, match: string): Promise<{ objects: number; bytes: number }> {
  return withRedis(redisUrl, async (r) => {
    const m = await keysMemory(r, match);
    return { objects: m.keys, bytes: m.bytes };
  });
}

/** Resolves when `check` is true, polling every `everyMs`; rejects after `timeoutMs`. */
export async function until(check: () => Promise<boolean> | boolean, timeoutMs: number, what: string, everyMs = 2): Promise<void> {
  const end = performance.now() + timeoutMs;
  while (!(await check())) {
    if (performance.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(everyMs);
  }
}

/** Deterministic pseudo-random sequence in [0, 1) (mulberry32), so both engines get the same delays. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function log(msg: string): void {
  process.stderr.write(`[bench ${new Date().toISOString().slice(11, 23)}] ${msg}\n`);
}

/** Linux's clock ticks a second in /proc (USER_HZ: 100 on every kernel we run on). */
const CLOCK_TICKS = 100;

/** The fields of /proc/<pid>/stat after the command name (state first), or null when the process is gone or not here. */
function procStat(pid: number): string[] | null {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return text.slice(text.lastIndexOf(')') + 2).split(' ');
  } catch {
    return null;
  }
}

/**
 * CPU seconds (user + system) of a process on this machine, and with
 * `family` those of its children: the ones it has reaped and the live ones.
 * Null when the process is not on this machine (Linux /proc only).
 */
export function processCpuSeconds(pid: number, family = false): number | null {
  const f = procStat(pid);
  if (!f) return null;
  // utime, stime, cutime, cstime are fields 14-17 of stat; here (from the state, field 3) indexes 11-14.
  let ticks = Number(f[11]) + Number(f[12]);
  if (family) {
    ticks += Number(f[13]) + Number(f[14]);
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      const c = procStat(Number(entry));
      if (c && Number(c[1]) === pid) ticks += Number(c[11]) + Number(c[12]);
    }
  }
  return ticks / CLOCK_TICKS;
}
