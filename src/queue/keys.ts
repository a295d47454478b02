// Every Redis key and channel name of the delay queue (and of the rate limiter's
// buckets, which run on its scripts) is built here, and only here.
// One hash tag per queue shard ({queue:shard}) keeps each script inside one
// Redis Cluster slot.
import { createHash } from 'node:crypto';

export type ShardKeys = {
  /** Index of the due buckets: ZSET bucket name -> lower bound (lua/lib/due-index.lua). */
  readonly due: string;
  /**
   * Prefix of the due bucket ZSETs (prefix + bucket name). Scripts declare it
   * in KEYS although no such key exists: see lua/README.md, slot migration.
   */
  readonly dueBuckets: string;
  readonly inflight: string;
  /**
   * Job records of jobs in flight, records too long for a record group, and
   * those written with groups off or before the groups (lua/lib/records.lua).
   */
  readonly jobs: string;
  /** The record groups' level, split pointer and record count (lua/lib/records.lua). */
  readonly records: string;
  /** Prefix of the record group HASHes (prefix + group number); like dueBuckets, declared in KEYS, never a key. */
  readonly recordGroups: string;
  readonly dead: string;
  readonly errors: string;
  /** Last fencing token handed out in the shard. */
  readonly seq: string;
  /** HASH '*' (the whole queue) or a job type -> ms paused at (lua/lib/pause.lua). */
  readonly paused: string;
  /** Prefix of the parked ZSETs (prefix + job type): due jobs of a paused type; like dueBuckets, declared in KEYS, never a key. */
  readonly parked: string;
  /** Pub/Sub channel announcing a new head of the due set. */
  readonly wake: string;
};

export const QUEUE_NAME_PATTERN = /^[a-z0-9][a-z0-9_-]{0,47}$/;

export function shardKeys(prefix: string, queue: string, shard: number): ShardKeys {
  const base = `${prefix}:{${queue}:${shard}}:`;
  return {
    due: `${base}due:index`,
    dueBuckets: `${base}due:`,
    inflight: `${base}inflight`,
    jobs: `${base}jobs`,
    records: `${base}rec`,
    recordGroups: `${base}rec:`,
    dead: `${base}dead`,
    errors: `${base}errors`,
    seq: `${base}seq`,
    paused: `${base}paused`,
    parked: `${base}parked:`,
    wake: `${base}wake`,
  };
}

/**
 * The number of shards a queue's data was written with, kept under shard 0's
 * hash tag: job ids are spread by hash mod that number, so running with
 * another one would strand jobs in shards nobody polls (fewer) or schedule a
 * second copy of a job in another shard (more).
 */
export function shardCountKey(prefix: string, queue: string): string {
  return `${prefix}:{${queue}:0}:shards`;
}

/**
 * The last change of the shard count (queue/shard-layout.ts, producer/reshard.ts),
 * beside the count under shard 0's hash tag: HASH `from`, `to`, `phase`
 * ('poll': workers poll both layouts' shards; 'move': producers write by `to`
 * and jobs are being moved; 'done': the count was set by it). Absent when the
 * queue was never resharded.
 */
export function reshardKey(prefix: string, queue: string): string {
  return `${prefix}:{${queue}:0}:reshard`;
}

/** STRING: the mover holding a queue's change of the shard count (expires unless renewed): one mover at a time. */
export function reshardLockKey(prefix: string, queue: string): string {
  return `${prefix}:{${queue}:0}:reshard:lock`;
}

/** STRING: the generations handed to the movers of a queue's changes of the shard count, one per mover run (INCR). */
export function reshardGenKey(prefix: string, queue: string): string {
  return `${prefix}:{${queue}:0}:reshard:gen`;
}

/** ZSET of the copies a change of the shard count made into a shard and has not settled (lua/lib/pause.lua, movingKey). */
export const movingCopiesKey = (k: ShardKeys) => `${k.parked}~moving`;

/** ZSET of the jobs a change of the shard count removed from a shard, their old one, by copy (lua/lib/pause.lua, movedOutKey). */
export const movedOutKey = (k: ShardKeys) => `${k.parked}~moved`;

/** FNV-1a over the id's UTF-16 code units: stable across processes and cheap. */
export function shardOf(jobId: string, shards: number): number {
  if (shards === 1) return 0;
  let h = 0x811c9dc5;
  for (let i = 0; i < jobId.length; i++) {
    h ^= jobId.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0) % shards;
}

/** The record groups' state, the fields of the shard's `records` HASH (lua/lib/records.lua). */
export type RecordGroupsState = { readonly level: number; readonly split: number; readonly count: number };

export function parseRecordGroupsState(fields: Readonly<Record<string, string>>): RecordGroupsState {
  return { level: Number(fields.l ?? 0), split: Number(fields.p ?? 0), count: Number(fields.n ?? 0) };
}

/** How many record groups a shard has under `s` (some may be empty, so absent). */
export const recordGroupCount = (s: RecordGroupsState) => 2 ** s.level + s.split;

/** The group key that holds, or would take, the record of `jobId` (lua/lib/records.lua's recGroup: the same hash and rule). */
export function recordGroupKey(k: ShardKeys, jobId: string, s: RecordGroupsState): string {
  const h = Number.parseInt(createHash('sha1').update(jobId).digest('hex').slice(0, 8), 16);
  const size = 2 ** s.level;
  let g = h % size;
  if (g < s.split) g = h % (size * 2);
  return `${k.recordGroups}${g}`;
}

export type BatcherShardKeys = {
  /** ZSET group -> deadline of its waiting items (first arrival + the group's maximum wait). */
  readonly groups: string;
  /** HASH group -> the group's own rule, "<batch size>,<max wait ms>" (lua/lib/group.lua); absent: the batcher's defaults. */
  readonly groupRules: string;
  /** Prefix of the per-group item ZSETs (prefix + group name). */
  readonly itemsPrefix: string;
  /** Pub/Sub channel announcing the deadline of a group that became the earliest waiting one. */
  readonly wake: string;
};

/**
 * Group names become part of a key: callers validate them against this first.
 * No braces (a second hash tag), colons or spaces; a '/' lets a caller name a
 * group of two parts (the parcels' "<client>/<area>").
 */
export const BATCH_GROUP_PATTERN = /^[A-Za-z0-9_.\/-]{1,100}$/;

/** The key prefix of the batchers running beside the queues of `queuePrefix` (their keys must not share a queue's names). */
export const batcherPrefix = (queuePrefix: string) => `${queuePrefix}b`;

export function batcherKeys(prefix: string, name: string, shard: number): BatcherShardKeys {
  const base = `${prefix}:{${name}:${shard}}:`;
  return { groups: `${base}groups`, groupRules: `${base}rules`, itemsPrefix: `${base}items:`, wake: `${base}wake` };
}

export type LatenessKeys = {
  /** HASH per second of the minute: "<s>:n" jobs started, "<s>:sum" ms late in total, "<s>:b<i>" jobs per lateness bucket. */
  readonly summary: string;
  /** ZSET second of the minute -> the latest start in it (ms), raised with ZADD GT. */
  readonly max: string;
};

/**
 * Lateness summaries of one queue for the minute starting at `minuteMs` (ms
 * since epoch, a whole minute). One hash tag per queue keeps a minute's two
 * keys, and a reader's pipeline over the minutes, in one Cluster slot.
 */
export function latenessKeys(prefix: string, queue: string, minuteMs: number): LatenessKeys {
  const base = `${prefix}:{${queue}:lateness}:${minuteMs}:`;
  return { summary: `${base}sum`, max: `${base}max` };
}

/**
 * The bucket of one rate limit (`limit`: key, authfail, contact...) for one
 * `key`, which the caller validated (an id, an address or a hash). "rl2": the
 * bucket is kept in µs; one in ms read as µs would refuse everything.
 */
export const rateBucketKey = (prefix: string, limit: string, key: string) => `${prefix}:rl2:${limit}:${key}`;

/** The sliding window of distinct members of one limit (`limit`: contacts...) for one validated `key` (a client id). */
export const distinctWindowKey = (prefix: string, limit: string, key: string) => `${prefix}:rld:${limit}:${key}`;

/**
 * The queue limiter's keys (queue/limits/): every bucket, slow-down and the
 * run-time rules share one hash tag, so one script judges a job's queue, type
 * and endpoint buckets together (on a cluster they all live on one node).
 * `scope` is a rule's scope (queue/limits/limit-rules.ts), validated there.
 */
export const queueLimitKeys = (prefix: string) => {
  const base = `${prefix}:{rl}:`;
  return {
    /** HASH: a scope's GCRA bucket: its theoretical arrival time `t` (µs) and the interval `i` it was filled under. */
    bucket: (scope: string) => `${base}b:${scope}`,
    /** ZSET: turns booked for refused jobs, `queue:jobId` -> turn (µs; lua/limits/admit.lua). */
    bookings: `${base}bookings`,
    /** HASH: an endpoint's slow-down (lua/limits/slow-down.lua). */
    slow: (endpoint: string) => `${base}s:${endpoint}`,
    /** ZSET: endpoints slowed down -> when their slow-down ends (ms), for the workers' caches and the admin view. */
    slowed: `${base}slowed`,
    /** HASH: the run-time rules, scope -> "count/intervalMs". */
    rules: `${base}rules`,
  };
};
export type QueueLimitKeys = ReturnType<typeof queueLimitKeys>;
