// Loads the Lua scripts in lua/ once per Redis client (defineCommand: EVALSHA with
// an EVAL fallback after a Redis restart) and gives each a typed function.
// Scripts get the libraries they use (lua/lib/) put in front of them.
// Only this file builds KEYS/ARGV arrays.
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ShardKeys } from '../keys.js';
import type { RedisClient } from '../redis-client.js';

export type { RedisClient };

/** The project's lua/ folder: the nearest one above this file (from src/ in development, dist/ in production). */
const LUA_DIR = (() => {
  for (let dir = dirname(fileURLToPath(import.meta.url)); ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'lua', 'lib'))) return join(dir, 'lua') + sep;
    if (dirname(dir) === dir) throw new Error('the lua/ folder of the delay queue was not found above src/queue/scripts');
  }
})();

/**
 * The keys of a queue shard, of a batcher shard and of a rate limiter's
 * bucket, in the one order every script takes them: a script takes the ones
 * it needs, in this order, and its header lists them under the same names
 * (test/unit/scripts-keys.test.ts holds each header to its entry below).
 */
export const KEY_ORDER = [
  'due',
  'dueBuckets',
  'inflight',
  'jobs',
  'records',
  'recordGroups',
  'dead',
  'errors',
  'seq',
  'groups',
  'items',
  'itemsPrefix',
  'bucket',
] as const;
export type KeyName = (typeof KEY_ORDER)[number];
export type ScriptKeys = Partial<Record<KeyName, string>>;

// Each script: its file under lua/, the keys it takes (their number is
// derived from this list, never restated), and the libraries (lua/lib/) put
// in front of it, in order.
export const SCRIPTS = {
  dqSchedule: {
    file: 'queue/schedule.lua',
    keys: ['due', 'dueBuckets', 'inflight', 'jobs', 'records', 'recordGroups', 'dead', 'errors'],
    libs: ['time', 'record', 'chunk', 'records', 'due-index'],
  },
  dqClaim: {
    file: 'queue/claim.lua',
    keys: ['due', 'dueBuckets', 'inflight', 'jobs', 'records', 'recordGroups', 'dead', 'errors', 'seq'],
    libs: ['time', 'record', 'chunk', 'records', 'due-index'],
  },
  dqAck: { file: 'queue/ack.lua', keys: ['inflight', 'jobs', 'records', 'recordGroups', 'errors'], libs: ['record', 'chunk', 'records'] },
  dqNack: {
    file: 'queue/nack.lua',
    keys: ['due', 'dueBuckets', 'inflight', 'jobs', 'records', 'recordGroups', 'dead', 'errors'],
    libs: ['time', 'record', 'chunk', 'records', 'due-index'],
  },
  dqExtend: { file: 'queue/extend.lua', keys: ['inflight', 'jobs', 'records', 'recordGroups'], libs: ['time', 'record', 'chunk', 'records'] },
  dqRelease: {
    file: 'queue/release.lua',
    keys: ['due', 'dueBuckets', 'inflight', 'jobs', 'records', 'recordGroups'],
    libs: ['time', 'record', 'chunk', 'records', 'due-index'],
  },
  dqCancel: {
    file: 'queue/cancel.lua',
    keys: ['due', 'dueBuckets', 'inflight', 'jobs', 'records', 'recordGroups', 'dead', 'errors'],
    libs: ['record', 'chunk', 'records', 'due-index'],
  },
  dqRedrive: {
    file: 'queue/redrive.lua',
    keys: ['due', 'dueBuckets', 'jobs', 'records', 'recordGroups', 'dead'],
    libs: ['time', 'record', 'chunk', 'records', 'due-index'],
  },
  dqDeleteDead: { file: 'queue/delete-dead.lua', keys: ['jobs', 'records', 'recordGroups', 'dead', 'errors'], libs: ['chunk', 'records'] },
  dqTrimDead: { file: 'queue/trim-dead.lua', keys: ['jobs', 'records', 'recordGroups', 'dead', 'errors'], libs: ['time', 'chunk', 'records'] },
  dqInspect: { file: 'queue/inspect.lua', keys: ['inflight', 'jobs', 'records', 'recordGroups', 'dead', 'errors'], libs: ['record', 'chunk', 'records'] },
  dqUngroup: { file: 'queue/ungroup.lua', keys: ['jobs', 'records', 'recordGroups'], libs: ['chunk', 'records'] },
  dqStats: {
    file: 'queue/stats.lua',
    keys: ['due', 'dueBuckets', 'inflight', 'jobs', 'records', 'recordGroups', 'dead'],
    libs: ['time', 'chunk', 'records', 'due-index'],
  },
  bqAdd: { file: 'batcher/add.lua', keys: ['groups', 'items'], libs: ['time', 'group'] },
  bqTakeDue: { file: 'batcher/take-due.lua', keys: ['groups', 'itemsPrefix'], libs: ['time', 'group'] },
  bqRemove: { file: 'batcher/remove.lua', keys: ['groups', 'items'], libs: ['chunk', 'group'] },
  bqRestore: { file: 'batcher/restore.lua', keys: ['groups', 'items'], libs: ['chunk', 'group'] },
  rlGcra: { file: 'limits/gcra.lua', keys: ['bucket'], libs: [] },
} as const satisfies Record<string, { file: string; keys: readonly KeyName[]; libs: readonly string[] }>;
export type ScriptName = keyof typeof SCRIPTS;
type RawReply = unknown;
type ScriptFn = (...keysAndArgs: (string | number)[]) => Promise<RawReply>;

/** The text of a file under lua/. */
export const readLua = (file: string) => readFileSync(LUA_DIR + file, 'utf8');

const sources = new Map<ScriptName, string>();
function source(name: ScriptName): string {
  let lua = sources.get(name);
  if (lua === undefined) {
    const s = SCRIPTS[name];
    lua = [...s.libs.map((lib) => readLua(`lib/${lib}.lua`)), readLua(s.file)].join('\n');
    sources.set(name, lua);
  }
  return lua;
}

const defined = new WeakSet<RedisClient>();

function ensureDefined(redis: RedisClient): void {
  if (defined.has(redis)) return;
  for (const name of Object.keys(SCRIPTS) as ScriptName[]) {
    redis.defineCommand(name, { numberOfKeys: SCRIPTS[name].keys.length, lua: source(name) });
  }
  defined.add(redis);
}

/**
 * Runs a registered script: KEYS are taken from `keys` by the names the
 * script's entry lists, in that order; `argv` follows. Only the engine's
 * script wrappers call this.
 */
export function call(redis: RedisClient, name: ScriptName, keys: ScriptKeys, argv: readonly (string | number)[]): Promise<RawReply> {
  ensureDefined(redis);
  const names: readonly KeyName[] = SCRIPTS[name].keys;
  const keyArgs = names.map((n) => {
    const k = keys[n];
    if (k === undefined) throw new Error(`script ${name} needs key ${n}`);
    return k;
  });
  const fn = (redis as unknown as Record<ScriptName, ScriptFn>)[name];
  return fn.apply(redis, [...keyArgs, ...argv]);
}

/** What a whole schedule call shares; sent once per call, not once per job. */
export type ScheduleHeader = {
  /** xp: only if pending (due, not in flight). */
  mode: 'upsert' | 'nx' | 'xx' | 'xp';
  timeKind: 'at' | 'in';
  /** '' keeps each job's current type and payload (reschedule). */
  type: string;
  maxAttempts: number | undefined;
};

export type ScheduleItem = {
  id: string;
  /** ms since epoch ("at") or ms from the Redis clock's now ("in"). */
  time: number;
  payload: string;
};

export const ScheduleCode = { CREATED: 1, UPDATED: 2, EXISTS: 3, NOT_FOUND: 4, DEAD: 5 } as const;
export type ScheduleCode = (typeof ScheduleCode)[keyof typeof ScheduleCode];

/** One reply per item, in order; dueAt is 0 when nothing was written. */
export async function runSchedule(
  redis: RedisClient,
  k: ShardKeys,
  h: ScheduleHeader,
  items: readonly ScheduleItem[],
  recordGroups: boolean,
): Promise<{ code: ScheduleCode; dueAt: number }[]> {
  const args: (string | number)[] = [k.wake, items.length, h.mode, h.timeKind, h.type, h.maxAttempts ?? '', recordGroups ? '1' : '0'];
  for (const it of items) args.push(it.id, it.time, it.payload);
  const [now, codes] = (await call(redis, 'dqSchedule', k, args)) as [number, string];
  const base = h.timeKind === 'in' ? Number(now) : 0;
  const out = new Array<{ code: ScheduleCode; dueAt: number }>(items.length);
  for (let i = 0; i < items.length; i++) {
    const code = (codes.charCodeAt(i) - 48) as ScheduleCode;
    const written = code === ScheduleCode.CREATED || code === ScheduleCode.UPDATED;
    out[i] = { code, dueAt: written ? base + (items[i] as ScheduleItem).time : 0 };
  }
  return out;
}

export type ClaimedRaw = { id: string; dueAt: number; record: string };
export type ClaimReply = {
  now: number;
  /** The claim ran after its deadline and changed nothing. */
  late: boolean;
  nextDue: number | null;
  nextLease: number | null;
  reclaimed: number;
  jobs: ClaimedRaw[];
};

/** `deadline`: ms since epoch on the Redis clock after which the claim must change nothing (null: none). */
export async function runClaim(
  redis: RedisClient,
  k: ShardKeys,
  max: number,
  leaseMs: number,
  maxReclaim: number,
  deadline: number | null = null,
): Promise<ClaimReply> {
  const args = [max, leaseMs, maxReclaim, deadline === null ? '' : Math.floor(deadline)];
  const r = (await call(redis, 'dqClaim', k, args)) as (string | number)[];
  const jobs: ClaimedRaw[] = [];
  for (let i = 4; i < r.length; i += 3) {
    jobs.push({ id: String(r[i]), dueAt: Number(r[i + 1]), record: String(r[i + 2]) });
  }
  const orNull = (v: unknown) => (Number(v) < 0 ? null : Number(v));
  const late = Number(r[3]) < 0;
  return { now: Number(r[0]), late, nextDue: orNull(r[1]), nextLease: orNull(r[2]), reclaimed: late ? 0 : Number(r[3]), jobs };
}

/** Returns the ids whose token no longer matched (nothing was changed for them). */
export async function runAck(redis: RedisClient, k: ShardKeys, items: readonly { id: string; token: number }[]): Promise<{ acked: number; stale: string[] }> {
  const args: (string | number)[] = [];
  for (const it of items) args.push(it.id, it.token);
  const r = (await call(redis, 'dqAck', k, args)) as (string | number)[];
  return { acked: Number(r[0]), stale: r.slice(1).map(String) };
}

export const NackCode = { STALE: 0, RETRY: 1, DEAD: 2 } as const;
export type NackCode = (typeof NackCode)[keyof typeof NackCode];

export async function runNack(
  redis: RedisClient,
  k: ShardKeys,
  id: string,
  token: number,
  outcome: 'retry' | 'dead',
  delayMs: number,
  error: string,
): Promise<{ code: NackCode; at: number }> {
  const r = (await call(redis, 'dqNack', k, [k.wake, id, token, outcome, delayMs, error])) as number[];
  return { code: r[0] as NackCode, at: Number(r[1]) };
}

/** Returns the new lease deadline (ms), or null when the lease is lost. */
export async function runExtend(redis: RedisClient, k: ShardKeys, id: string, token: number, leaseMs: number): Promise<number | null> {
  const r = Number(await call(redis, 'dqExtend', k, [id, token, leaseMs]));
  return r > 0 ? r : null;
}

/** `when`: a delay from the Redis clock's now (default 0), or an absolute due time. */
export async function runRelease(
  redis: RedisClient,
  k: ShardKeys,
  items: readonly { id: string; token: number }[],
  when: { delayMs: number } | { at: number } = { delayMs: 0 },
): Promise<number> {
  const time = 'at' in when ? ['at', Math.floor(when.at)] : ['in', Math.max(0, Math.ceil(when.delayMs))];
  const args: (string | number)[] = [k.wake, ...time];
  for (const it of items) args.push(it.id, it.token);
  return Number(await call(redis, 'dqRelease', k, args));
}

export const CancelCode = { NOT_FOUND: 0, PENDING: 1, IN_FLIGHT: 2, DEAD: 3 } as const;
export type CancelCode = (typeof CancelCode)[keyof typeof CancelCode];

export async function runCancel(redis: RedisClient, k: ShardKeys, id: string): Promise<CancelCode> {
  return Number(await call(redis, 'dqCancel', k, [id])) as CancelCode;
}

export async function runRedrive(redis: RedisClient, k: ShardKeys, target: { id: string } | { max: number }): Promise<number> {
  const sel = 'id' in target ? ['one', target.id] : ['all', target.max];
  return Number(await call(redis, 'dqRedrive', k, [k.wake, ...sel]));
}

/**
 * Removes dead jobs older than `maxAgeMs`, then the oldest beyond `maxCount`
 * among those dead for at least `minAgeMs`, at most `limit`; returns how many.
 */
export async function runTrimDead(redis: RedisClient, k: ShardKeys, maxAgeMs: number, maxCount: number, limit: number, minAgeMs = 0): Promise<number> {
  return Number(await call(redis, 'dqTrimDead', k, [Math.floor(maxAgeMs), maxCount, limit, Math.floor(minAgeMs)]));
}

export async function runDeleteDead(redis: RedisClient, k: ShardKeys, ids: readonly string[]): Promise<number> {
  return Number(await call(redis, 'dqDeleteDead', k, ids));
}

export type InspectReply = {
  record: string | null;
  dueAt: number | null;
  leaseUntil: number | null;
  diedAt: number | null;
  lastError: string | null;
};

export async function runInspect(redis: RedisClient, k: ShardKeys, id: string): Promise<InspectReply> {
  const r = (await call(redis, 'dqInspect', k, [id])) as (string | null)[];
  const num = (v: string | null | undefined) => (v == null ? null : Number(v));
  return {
    record: r[0] ?? null,
    dueAt: num(r[1]),
    leaseUntil: num(r[2]),
    diedAt: num(r[3]),
    lastError: r[4] ?? null,
  };
}

/**
 * Moves the records of up to `maxGroups` record groups, counting down from
 * `from` (null: the last), into the jobs HASH; next is -1 when none is left,
 * -2 when some were written behind the cursor (start again from the last).
 */
export async function runUngroup(redis: RedisClient, k: ShardKeys, from: number | null, maxGroups: number): Promise<{ moved: number; next: number }> {
  const r = (await call(redis, 'dqUngroup', k, [from === null ? '' : from, maxGroups])) as number[];
  return { moved: Number(r[0]), next: Number(r[1]) };
}

export type StatsReply = {
  now: number;
  pending: number;
  dueNow: number;
  inFlight: number;
  dead: number;
  nextDueAt: number | null;
};

export async function runStats(redis: RedisClient, k: ShardKeys): Promise<StatsReply> {
  const r = ((await call(redis, 'dqStats', k, [])) as number[]).map(Number);
  return {
    now: r[0] ?? 0,
    pending: r[1] ?? 0,
    dueNow: r[2] ?? 0,
    inFlight: r[3] ?? 0,
    dead: r[4] ?? 0,
    nextDueAt: (r[5] ?? -1) < 0 ? null : (r[5] ?? null),
  };
}
