// The mover's way on a Redis Cluster, where a job's old and new shards are in
// different slots and no one script may touch both: copy, remove, settle
// (lua/queue/move-in.lua, move-out.lua, move-settle.lua). The copy is not
// claimable until settled, so the job runs from one shard only; the old copy
// goes only if unchanged, else the new one is taken back. Three rules make a
// stop, a second mover or a failover between the steps harmless:
//   - every step runs only for the shards' latest mover (move-fence.lua), so
//     a mover that stalled past its lock changes nothing once another began;
//   - the old shard keeps a proof of each job the mover removed (moved-out),
//     and the copies a stopped mover left are filed on that proof only: a job
//     gone from its old shard because it ran or was cancelled is not run again;
//   - a copy is relied on only once every replica of its master has it (WAIT)
//     and the master still has it after the wait (read again: a failover
//     before the wait answers for the new master); a proof goes only once
//     its copy's settle is on the replicas and read back.
import { type ShardKeys, movedOutKey, movingCopiesKey, shardOf } from '../keys.js';
import { parseRecord } from '../record.js';
import { type RedisClient, isCluster } from '../redis-client.js';
import { runInspect } from '../scripts/admin-scripts.js';
import { type CopiedJob, type MoveReply, runMoveIn, runMoveOut, runMoveSettle } from '../scripts/move-scripts.js';

export type CopyMover = {
  readonly redis: RedisClient;
  /** This mover's generation (move-fence.lua). */
  readonly gen: number;
  readonly recordGroups: boolean;
  /** How long a step waits for the replicas to acknowledge its writes (ms). */
  readonly replicaWaitMs: number;
  /**
   * On one server, the most replicas seen per master (by its run id) during
   * this run: a replica whose link is down drops out of ROLE's list, yet a
   * failover may still promote it, so it is still waited for. (A cluster
   * tells which replicas it knows: CLUSTER REPLICAS.)
   */
  readonly replicas: Map<string, number>;
};

export type CopyReply = MoveReply & {
  /** Copies taken back because no replica acknowledged them in time: moved in a later pass. */
  unreplicated: number;
  /** Copies taken back because the job changed in its old shard meanwhile (or lost): moved in a later pass. */
  kept: number;
};

/** Moves `ids` (jobs of `from` whose new shard is `to`) in the three steps. */
export async function moveByCopy(m: CopyMover, from: ShardKeys, to: ShardKeys, ids: readonly string[]): Promise<CopyReply> {
  const { redis, gen } = m;
  const r: CopyReply = { moved: 0, inFlight: 0, dropped: 0, stuck: 0, unreplicated: 0, kept: 0 };
  const seen = await Promise.all(ids.map((id) => runInspect(redis, from, id)));
  const read: CopiedJob[] = [];
  ids.forEach((id, i) => {
    const s = seen[i];
    if (!s || s.record === null) return;
    if (s.leaseUntil !== null) r.inFlight++;
    else if (s.diedAt === null && !readable(s.record)) r.stuck++;
    else read.push({ id, record: s.record, diedAt: s.diedAt ?? 0, lastError: s.lastError });
  });
  if (read.length === 0) return r;
  const copiedAt = await runMoveIn(redis, to, gen, read, m.recordGroups);
  const copies = read.filter((_, i) => copiedAt[i]);
  let live = new Set<string>();
  if (copies.length > 0) {
    if (!(await replicated(m, to))) {
      // The old shard keeps every job: a failover now could lose the copies.
      r.unreplicated += (
        await runMoveSettle(
          redis,
          to,
          gen,
          copies.map((j) => ({ id: j.id, gone: false })),
        )
      ).takenBack;
      return r;
    }
    // Read again after the wait: a master that changed under the mover (a
    // failover before the wait) answers for copies it never had.
    live = await stillCopies(redis, to, copies);
    r.kept += copies.length - live.size; // a write took it (moved later) or a failover lost it (still in its old shard)
  }
  // Out of the old shard: the live copies, and the jobs the new shard already had (the later write).
  const out = read.filter((j, i) => live.has(j.id) || !copiedAt[i]);
  const gone = out.length > 0 ? await runMoveOut(redis, from, gen, out) : [];
  const settle: { id: string; gone: boolean }[] = [];
  // Not a live copy: the new shard had the job (the later write). Its old copy
  // went (dropped), or changed since it was read and goes in a later pass (kept).
  out.forEach((j, i) => {
    if (live.has(j.id)) settle.push({ id: j.id, gone: gone[i] === true });
    else if (gone[i]) r.dropped++;
    else r.kept++;
  });
  if (settle.length > 0) {
    const s = await runMoveSettle(redis, to, gen, settle);
    r.moved += s.filed;
    r.kept += s.takenBack; // changed in the old shard since it was read: moved in a later pass
  }
  const removed = out.filter((_, i) => gone[i]);
  if (removed.length > 0) {
    // Best effort: a removal lost with its master runs the job twice at worst, as any lost ack does.
    await replicated(m, from);
    // A proof goes once its copy's settle is on a replica, read back from the master that has it.
    if (await replicated(m, to)) {
      const unsettled = await stillCopies(redis, to, removed);
      const done = removed.filter((j) => !unsettled.has(j.id)).map((j) => j.id);
      if (done.length > 0) await redis.zrem(movedOutKey(from), ...done);
    }
  }
  return r;
}

/** Which of `jobs` are among the shard's unsettled copies now. */
async function stillCopies(redis: RedisClient, k: ShardKeys, jobs: readonly { id: string }[]): Promise<Set<string>> {
  const scores = await redis.zmscore(movingCopiesKey(k), ...jobs.map((j) => j.id));
  return new Set(jobs.filter((_, i) => scores[i] !== null).map((j) => j.id));
}

/**
 * Settles the copies left in the new shards by a mover that stopped between
 * the steps (or whose settle a failover lost): filed where the old shard
 * holds the proof that the mover removed the job, taken back everywhere else
 * (a later pass moves it if the old shard still has it).
 */
export async function settleLeftCopies(m: CopyMover, keys: readonly ShardKeys[], from: number, to: number): Promise<number> {
  const { redis, gen } = m;
  let settled = 0;
  for (let t = 0; t < to; t++) {
    const k = keys[t] as ShardKeys;
    const ids = await redis.zrange(movingCopiesKey(k), 0, -1);
    if (ids.length === 0) continue;
    const proofs = await Promise.all(ids.map((id) => redis.zscore(movedOutKey(keys[shardOf(id, from)] as ShardKeys), id)));
    const r = await runMoveSettle(
      redis,
      k,
      gen,
      ids.map((id, i) => ({ id, gone: proofs[i] !== null })),
    );
    settled += r.filed + r.takenBack;
  }
  return settled;
}

/** Drops every shard's proofs of removal: at the start of a change and once it has settled every copy. */
export async function forgetMovedOut(redis: RedisClient, keys: readonly ShardKeys[]): Promise<void> {
  await Promise.all(keys.map((k) => redis.del(movedOutKey(k))));
}

/**
 * Whether every replica of the master holding shard `k` has acknowledged
 * the writes this client sent it so far (WAIT, through the connection the
 * mover's scripts used: a pipeline goes to the slot of its keyed command).
 * Every replica, since a failover may promote any: those ROLE lists now, and
 * those it does not list because their link is down a moment: on a cluster,
 * every replica the cluster knows of the master and has not marked failed;
 * on one server, those ROLE listed earlier in this run. True at once when the
 * master has none: there is no failover to lose the write to.
 */
export async function replicated(m: Pick<CopyMover, 'redis' | 'replicaWaitMs' | 'replicas'>, k: ShardKeys): Promise<boolean> {
  const { redis } = m;
  const cluster = isCluster(redis);
  // The master's name: its node id on a cluster, its run id (in INFO) on one server.
  const [cmd, arg] = cluster ? ['CLUSTER', 'MYID'] : ['INFO', 'server'];
  const got = await redis.pipeline().exists(k.records).call('ROLE').call(cmd, arg).exec();
  const listed = (got?.[1]?.[1] as unknown[] | undefined)?.[2];
  let want = Array.isArray(listed) ? listed.length : 0;
  const name = String(got?.[2]?.[1] ?? '');
  if (cluster) {
    const known = await redis.pipeline().exists(k.records).call('CLUSTER', 'REPLICAS', name).exec();
    const lines = known?.[1]?.[1];
    // Flags are the third field of a node's line: "slave,fail" is a replica the cluster gave up on (it may not be promoted).
    if (Array.isArray(lines)) want = Math.max(want, lines.filter((l) => !/(^|,)fail(,|$)/.test(String(l).split(' ')[2] ?? '')).length);
  } else {
    const master = /run_id:(\w+)/.exec(name)?.[1] ?? k.records;
    want = Math.max(want, m.replicas.get(master) ?? 0);
    m.replicas.set(master, want);
  }
  if (want === 0) return true;
  const acked = await redis.pipeline().exists(k.records).call('WAIT', want, m.replicaWaitMs).exec();
  return Number(acked?.[1]?.[1] ?? 0) >= want;
}

function readable(record: string): boolean {
  try {
    parseRecord(record);
    return true;
  } catch {
    return false;
  }
}
