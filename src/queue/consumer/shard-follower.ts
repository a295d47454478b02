// Follows a change of a queue's shard count while its worker runs
// (producer/reshard.ts): reads the layout again each second, and at once when
// a shard's wake channel announces a change, and has the worker start polling
// each shard the layout adds. A shard the layout drops is still polled until
// the worker stops: it is empty once the change ends, and a job claimed from
// it before keeps its keys for its ack.
import type { Queue } from '../producer/queue.js';
import { LAYOUT_REFRESH_MS } from '../shard-layout.js';
import type { QueueLogger } from '../types.js';

export type ShardFollower = { start(): void; stop(): void; readNow(): void };

export function createShardFollower(o: {
  readonly queue: Queue;
  readonly log: QueueLogger;
  /** Shards polled so far. */
  polled(): number;
  /** Starts polling `shard` (its claim loop, ack batcher and wake channel). */
  addShard(shard: number): Promise<void>;
}): ShardFollower {
  let timer: NodeJS.Timeout | null = null;
  let running: Promise<void> | null = null;
  let again = false;
  let stopped = false;
  let failing = false;

  async function follow(force: boolean): Promise<void> {
    await o.queue.layout.fresh(force);
    // One shard at a time, in order: shard i is polled before shard i + 1.
    while (!stopped && o.polled() < o.queue.keys.length) {
      const shard = o.polled();
      await o.addShard(shard);
      o.log.info({ queue: o.queue.name, shard, layout: o.queue.layout.current }, 'polling a shard the shard count change added');
    }
  }

  function run(force: boolean): void {
    if (stopped) return;
    if (running) {
      again ||= force;
      return;
    }
    running = follow(force)
      .then(() => {
        failing = false;
      })
      .catch((err: unknown) => {
        // Once per outage: Redis down is said by the claim loops already.
        if (!failing) o.log.warn({ err, queue: o.queue.name }, 'reading the shard layout failed; trying again each second');
        failing = true;
      })
      .finally(() => {
        running = null;
        if (again) {
          again = false;
          run(true);
        }
      });
  }

  return {
    start() {
      timer = setInterval(() => run(false), LAYOUT_REFRESH_MS);
      timer.unref();
    },
    stop() {
      stopped = true;
      if (timer) clearInterval(timer);
    },
    readNow: () => run(true),
  };
}
