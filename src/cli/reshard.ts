// The `reshard` subcommand: changes the shard count of a queue (or of every
// queue, one after another) while the service runs; the engine's mover does
// the work (queue/producer/reshard.ts, docs/operations.md).
//   reshard --queue orders --to 4      reshard --queue all --to 4
import { serviceQueues } from '../composition/service-queues.js';
import type { Config } from '../config.js';
import type { Logger } from '../core/logger.js';
import { createRedis, redisTargetOf } from '../core/redis.js';
import { ReshardError, reshard } from '../queue/index.js';

export const RESHARD_USAGE = 'usage: reshard --queue <name|all> --to <shards 1..1024>';

/** Runs the command; what it prints goes to `out`. Returns the exit code. */
export async function reshardCommand(config: Config, args: readonly string[], log: Logger, out: (line: string) => void): Promise<number> {
  const name = optionOf(args, '--queue');
  const toText = optionOf(args, '--to');
  const to = Number(toText);
  if (!name || !toText || !/^\d+$/.test(toText) || to < 1 || to > 1024) {
    out(RESHARD_USAGE);
    return 2;
  }
  const redis = createRedis(redisTargetOf(config), 'ots-reshard');
  try {
    const known = serviceQueues(redis, config);
    const queues = name === 'all' ? known : known.filter((q) => q.name === name);
    if (queues.length === 0) {
      out(`no queue "${name}"; the service's queues: ${known.map((q) => q.name).join(', ')}\n${RESHARD_USAGE}`);
      return 2;
    }
    for (const q of queues) {
      const r = await reshard(redis, { prefix: q.prefix, name: q.name }, to, { log, recordGroups: config.QUEUE_RECORD_GROUPS === '1' });
      out(
        r.from === r.to
          ? `${q.name}: already ${r.to} shards`
          : `${q.name}: ${r.from} -> ${r.to} shards; ${r.moved} jobs moved, ${r.dropped} old copies dropped, ${r.passes} passes` +
              (r.stuck > 0 ? `; ${r.stuck} unreadable records left where they were` : ''),
      );
    }
    return 0;
  } catch (err) {
    if (!(err instanceof ReshardError)) throw err;
    out(`refused: ${err.message}`);
    return 1;
  } finally {
    redis.disconnect();
  }
}

function optionOf(args: readonly string[], name: string): string | undefined {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
}
