// Reading a queue without changing it: one job by id, and the counts per
// shard and in total, each shard read by one script call.
import type { JobInfo, JobState, QueueStats } from '../types.js';
import { DEFAULT_PRIORITY, type JobRecord, parseRecord } from '../record.js';
import type { ShardKeys } from '../keys.js';
import { type InspectReply, runInspect, runStats } from '../scripts/admin-scripts.js';
import { shardsOf } from '../shard-layout.js';
import { type QueueSetup, maxAttemptsOf } from './queue-options.js';
import { checkId, decodePayload } from './schedule-input.js';

export function createLookups(q: QueueSetup) {
  const { redis, name, keys, layout } = q;
  const typeNames = Object.keys(q.types);

  async function get(id: string): Promise<JobInfo | null> {
    checkId(id);
    // Old shard first while jobs move (shard-layout.ts: shardsOf).
    let r: InspectReply | undefined;
    for (const sh of shardsOf(await layout.fresh(), id)) {
      r = await runInspect(redis, keys[sh] as ShardKeys, id);
      if (r.record !== null) break;
    }
    if (!r || r.record === null) return null;
    const state: JobState = r.diedAt !== null ? 'dead' : r.leaseUntil !== null ? 'in_flight' : 'pending';
    let rec: JobRecord;
    let payload: unknown;
    try {
      rec = parseRecord(r.record);
      payload = decodePayload(rec.payload);
    } catch {
      // A record a claim parked as corrupt (or a payload that is not JSON) is
      // shown as its raw text: a lookup and the dead-letter listing must still
      // answer, so an operator can see it and delete it.
      const times = { dueAt: r.dueAt, leaseUntil: r.leaseUntil, diedAt: r.diedAt, lastError: r.lastError, parked: r.parked };
      return { id, state, type: '', payload: r.record, attempts: 0, maxAttempts: 0, priority: DEFAULT_PRIORITY, ...times };
    }
    return {
      id,
      state,
      type: rec.type,
      payload,
      attempts: rec.attempts,
      maxAttempts: maxAttemptsOf(q.types, rec.type, rec.maxAttempts),
      dueAt: r.dueAt,
      leaseUntil: r.leaseUntil,
      diedAt: r.diedAt,
      lastError: r.lastError,
      parked: r.parked,
      priority: rec.priority,
    };
  }

  async function shardStats(): Promise<QueueStats[]> {
    await layout.fresh(); // every shard a change of the shard count added too
    return Promise.all(
      keys.map(async (k, shard) => {
        const s = await runStats(redis, k, typeNames);
        const lag = s.dueNow > 0 && s.nextDueAt !== null ? Math.max(0, s.now - s.nextDueAt) : 0;
        const { now: _now, ...counts } = s;
        return { queue: name, shard, ...counts, oldestDueLagMs: lag };
      }),
    );
  }

  /** The queue's totals and each shard's figures, from one read of every shard. */
  async function overview(): Promise<{ total: QueueStats; shards: QueueStats[] }> {
    const per = await shardStats();
    const sum = (f: (s: QueueStats) => number) => per.reduce((a, s) => a + f(s), 0);
    const heads = per.map((s) => s.nextDueAt).filter((v): v is number => v !== null);
    const total: QueueStats = {
      queue: name,
      shard: 'all',
      pending: sum((s) => s.pending),
      dueNow: sum((s) => s.dueNow),
      inFlight: sum((s) => s.inFlight),
      dead: sum((s) => s.dead),
      nextDueAt: heads.length ? Math.min(...heads) : null,
      oldestDueLagMs: Math.max(0, ...per.map((s) => s.oldestDueLagMs)),
      parked: sum((s) => s.parked),
      paused: [...new Set(per.flatMap((s) => s.paused))].sort(),
    };
    return { total, shards: per };
  }

  async function stats(): Promise<QueueStats> {
    return (await overview()).total;
  }

  return { get, shardStats, overview, stats };
}
