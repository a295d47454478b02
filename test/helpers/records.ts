// Reading a queue shard's job records the way lua/lib/records.lua keeps them:
// in the record groups and in the jobs HASH (long records, and those written
// with groups off). Tests look at records through these, never at one key.
import { type RecordGroupsState, type ShardKeys, parseRecordGroupsState, recordGroupCount, recordGroupKey } from '../../src/queue/keys.js';
import type { RedisClient } from '../../src/queue/redis-client.js';

export async function recordGroupsState(redis: RedisClient, k: ShardKeys): Promise<RecordGroupsState> {
  return parseRecordGroupsState(await redis.hgetall(k.records));
}

/** Every group key the shard may hold under its current state. */
export async function recordGroupKeys(redis: RedisClient, k: ShardKeys): Promise<string[]> {
  const n = recordGroupCount(await recordGroupsState(redis, k));
  return Array.from({ length: n }, (_, g) => `${k.recordGroups}${g}`);
}

/** Every record of the shard, id -> record text. */
export async function allRecords(redis: RedisClient, k: ShardKeys): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const key of [...(await recordGroupKeys(redis, k)), k.jobs]) Object.assign(out, await redis.hgetall(key));
  return out;
}

/** The key holding the record of `id` now, or null. */
export async function recordKeyOf(redis: RedisClient, k: ShardKeys, id: string): Promise<string | null> {
  const group = recordGroupKey(k, id, await recordGroupsState(redis, k));
  if ((await redis.hexists(group, id)) === 1) return group;
  return (await redis.hexists(k.jobs, id)) === 1 ? k.jobs : null;
}

export async function getRecord(redis: RedisClient, k: ShardKeys, id: string): Promise<string | null> {
  const key = await recordKeyOf(redis, k, id);
  return key === null ? null : redis.hget(key, id);
}

/** Overwrites the record of `id` where it is (a test corrupting it); in the jobs HASH if it has none. */
export async function setRecord(redis: RedisClient, k: ShardKeys, id: string, text: string): Promise<void> {
  await redis.hset((await recordKeyOf(redis, k, id)) ?? k.jobs, id, text);
}
