// The first step of a rollback to a build that reads only the jobs HASH:
// every record out of the record groups, shard by shard.
import type { ShardKeys } from '../keys.js';
import type { RedisClient } from '../redis-client.js';
import { runUngroup } from '../scripts/admin-scripts.js';

/** Record groups emptied per script call: a call stays short while the service runs. */
const UNGROUP_CALL = 100;
/** Passes from the top per shard before giving up on groups that keep filling. */
const UNGROUP_PASSES = 3;

/**
 * Moves every record out of the record groups into the shards' jobs HASHes
 * (for a rollback to a build that reads only those), 100 groups a call;
 * returns how many moved. Every process must write with groups off
 * (recordGroups false) meanwhile, or records go back as they are written.
 */
export async function ungroupRecords(redis: RedisClient, keys: readonly ShardKeys[]): Promise<number> {
  let moved = 0;
  for (const k of keys) {
    let passes = 1;
    for (let next: number | null = null; next !== -1;) {
      const r = await runUngroup(redis, k, next, UNGROUP_CALL);
      moved += r.moved;
      next = r.next === -2 ? null : r.next;
      // Records written into the groups behind the cursor: once more from the top, a few times at most.
      if (r.next === -2 && ++passes > UNGROUP_PASSES) {
        throw new Error(`record groups of ${k.records} keep filling while they are emptied: a process still runs with QUEUE_RECORD_GROUPS=1`);
      }
    }
  }
  return moved;
}
