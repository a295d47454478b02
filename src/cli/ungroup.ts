// The `ungroup` subcommand: moves every job record out of the record groups
// into each shard's one records HASH, the first step of a rollback to a build
// that reads only that HASH (docs/operations.md, Upgrading). Refuses to run with
// QUEUE_RECORD_GROUPS=1: every process must write without groups meanwhile,
// this one included.
import { serviceQueues } from '../composition/service-queues.js';
import type { Config } from '../config.js';
import { createRedis, redisTargetOf } from '../core/redis.js';

export async function ungroupCommand(config: Config, out: (line: string) => void): Promise<number> {
  if (config.QUEUE_RECORD_GROUPS === '1') {
    out(
      'refusing: QUEUE_RECORD_GROUPS=1 here. Set QUEUE_RECORD_GROUPS=0 for every process (this one too) first, or records go back into groups as they are written.',
    );
    return 2;
  }
  const redis = createRedis(redisTargetOf(config), 'ots-ungroup');
  try {
    for (const queue of serviceQueues(redis, config)) {
      out(`${queue.name}: ${await queue.ungroup()} records moved to the one records HASH of each shard`);
    }
    return 0;
  } finally {
    redis.disconnect();
  }
}
