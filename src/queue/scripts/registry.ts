// The queue's, the batcher's and the rate limiter's Lua scripts: which file,
// which keys in which order, which libraries (lua/lib/) go in front; loaded
// once per Redis client (defineCommand: EVALSHA with an EVAL fallback after a
// Redis restart) and run by name. Only the typed wrappers beside this file
// call it, so nothing outside scripts/ builds KEYS/ARGV.
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { RedisClient } from '../redis-client.js';

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
  'paused',
  'parked',
  'groups',
  'groupRules',
  'items',
  'itemsPrefix',
  'bucket',
  'window',
  'queueBucket',
  'typeBucket',
  'endpointBucket',
  'endpointSlow',
  'bookings',
  'slowed',
  // A second shard's keys, for the one script that moves jobs between shards (queue/move.lua).
  'toDue',
  'toDueBuckets',
  'toJobs',
  'toRecords',
  'toRecordGroups',
  'toDead',
  'toErrors',
  // A queue's shard count and its change (all under shard 0's hash tag).
  'shardCount',
  'reshard',
  'reshardLock',
] as const;
export type KeyName = (typeof KEY_ORDER)[number];
export type ScriptKeys = Partial<Record<KeyName, string>>;

// Each script: its file under lua/, the keys it takes (their number is
// derived from this list, never restated), and the libraries (lua/lib/) put
// in front of it, in order.
export const SCRIPTS = {
  dqSchedule: {
    file: 'queue/schedule.lua',
    keys: ['due', 'dueBuckets', 'inflight', 'jobs', 'records', 'recordGroups', 'dead', 'errors', 'paused', 'parked'],
    libs: ['time', 'record', 'chunk', 'records', 'due-index', 'pause'],
  },
  dqClaim: {
    file: 'queue/claim.lua',
    keys: ['due', 'dueBuckets', 'inflight', 'jobs', 'records', 'recordGroups', 'dead', 'errors', 'seq', 'paused', 'parked'],
    libs: ['time', 'record', 'chunk', 'records', 'due-index', 'pause'],
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
    keys: ['due', 'dueBuckets', 'inflight', 'jobs', 'records', 'recordGroups', 'dead', 'errors', 'paused', 'parked'],
    libs: ['record', 'chunk', 'records', 'due-index', 'pause'],
  },
  dqRedrive: {
    file: 'queue/redrive.lua',
    keys: ['due', 'dueBuckets', 'jobs', 'records', 'recordGroups', 'dead'],
    libs: ['time', 'record', 'chunk', 'records', 'due-index'],
  },
  dqDeleteDead: { file: 'queue/delete-dead.lua', keys: ['jobs', 'records', 'recordGroups', 'dead', 'errors'], libs: ['chunk', 'records'] },
  dqTrimDead: { file: 'queue/trim-dead.lua', keys: ['jobs', 'records', 'recordGroups', 'dead', 'errors'], libs: ['time', 'chunk', 'records'] },
  dqInspect: {
    file: 'queue/inspect.lua',
    keys: ['inflight', 'jobs', 'records', 'recordGroups', 'dead', 'errors', 'paused', 'parked'],
    libs: ['record', 'chunk', 'records', 'due-index', 'pause'],
  },
  dqUngroup: { file: 'queue/ungroup.lua', keys: ['jobs', 'records', 'recordGroups'], libs: ['chunk', 'records'] },
  dqStats: {
    file: 'queue/stats.lua',
    keys: ['due', 'dueBuckets', 'inflight', 'jobs', 'records', 'recordGroups', 'dead', 'paused', 'parked'],
    libs: ['time', 'record', 'chunk', 'records', 'due-index', 'pause'],
  },
  dqPause: { file: 'queue/pause.lua', keys: ['paused'], libs: ['time'] },
  dqResume: {
    file: 'queue/resume.lua',
    keys: ['due', 'dueBuckets', 'jobs', 'records', 'recordGroups', 'paused', 'parked'],
    libs: ['record', 'chunk', 'records', 'due-index', 'pause'],
  },
  dqMove: {
    file: 'queue/move.lua',
    keys: [
      'due',
      'dueBuckets',
      'inflight',
      'jobs',
      'records',
      'recordGroups',
      'dead',
      'errors',
      'paused',
      'parked',
      'toDue',
      'toDueBuckets',
      'toJobs',
      'toRecords',
      'toRecordGroups',
      'toDead',
      'toErrors',
    ],
    libs: ['record', 'chunk', 'records', 'due-index', 'pause'],
  },
  dqMoveIn: {
    file: 'queue/move-in.lua',
    keys: ['jobs', 'records', 'recordGroups', 'errors', 'paused', 'parked'],
    libs: ['record', 'chunk', 'records', 'due-index', 'pause'],
  },
  dqMoveOut: {
    file: 'queue/move-out.lua',
    keys: ['due', 'dueBuckets', 'inflight', 'jobs', 'records', 'recordGroups', 'dead', 'errors', 'paused', 'parked'],
    libs: ['record', 'chunk', 'records', 'due-index', 'pause'],
  },
  dqMoveSettle: {
    file: 'queue/move-settle.lua',
    keys: ['due', 'dueBuckets', 'jobs', 'records', 'recordGroups', 'dead', 'errors', 'paused', 'parked'],
    libs: ['record', 'chunk', 'records', 'due-index', 'pause'],
  },
  dqMoveFence: { file: 'queue/move-fence.lua', keys: ['paused', 'parked'], libs: ['pause'] },
  dqLayoutFence: { file: 'queue/layout-fence.lua', keys: ['records'], libs: [] },
  dqReshardStep: { file: 'queue/reshard-step.lua', keys: ['shardCount', 'reshard', 'reshardLock'], libs: [] },
  dqReshardLock: { file: 'queue/reshard-lock.lua', keys: ['reshardLock'], libs: [] },
  bqAdd: { file: 'batcher/add.lua', keys: ['groups', 'groupRules', 'items'], libs: ['time', 'group'] },
  bqTakeDue: { file: 'batcher/take-due.lua', keys: ['groups', 'groupRules', 'itemsPrefix'], libs: ['time', 'group'] },
  bqRemove: { file: 'batcher/remove.lua', keys: ['groups', 'groupRules', 'items'], libs: ['chunk', 'group'] },
  bqRestore: { file: 'batcher/restore.lua', keys: ['groups', 'groupRules', 'items'], libs: ['chunk', 'group'] },
  rlGcra: { file: 'limits/gcra.lua', keys: ['bucket'], libs: [] },
  rlDistinct: { file: 'limits/distinct.lua', keys: ['window'], libs: [] },
  qlAdmit: { file: 'limits/admit.lua', keys: ['queueBucket', 'typeBucket', 'endpointBucket', 'endpointSlow', 'bookings'], libs: [] },
  qlSlowDown: { file: 'limits/slow-down.lua', keys: ['endpointSlow', 'slowed'], libs: [] },
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
