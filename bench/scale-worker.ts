// A worker process of the scale-out benchmark (forked with `node --import tsx`).
// argv[2]: JSON ScaleChildArgs. Over IPC: 'ready' once connected (not yet
// claiming); on 'go' it starts claiming; every 100 ms it reports how many jobs
// it completed and their lateness samples; on 'stop' it stops, reports the
// rest, says 'done' and exits.
import { createRedis } from '../src/core/redis.js';
import { createQueue } from '../src/queue/producer/queue.js';
import { createWorker } from '../src/queue/consumer/worker.js';

export type ScaleChildArgs = {
  url: string;
  clusterNodes?: { host: string; port: number }[];
  prefix: string;
  name: string;
  shards: number;
  concurrency: number;
};
export type ScaleChildMessage =
  { type: 'ready' } | { type: 'progress'; completed: number; lateness: number[] } | { type: 'done' } | { type: 'error'; message: string };

const REPORT_EVERY_MS = 100;

function send(m: ScaleChildMessage): Promise<void> {
  return new Promise((resolve) => (process.send ? process.send(m, undefined, {}, () => resolve()) : resolve()));
}

async function main(): Promise<void> {
  const a = JSON.parse(process.argv[2] ?? '') as ScaleChildArgs;
  const target = { url: a.url, clusterNodes: a.clusterNodes };
  const producer = createRedis(target, 'bench-scale-stats');
  const redis = createRedis(target, 'bench-scale-worker');
  const queue = createQueue(producer, { name: a.name, prefix: a.prefix, shards: a.shards, types: { noop: {} } });
  let completed = 0;
  const lateness: number[] = [];
  const worker = createWorker({
    queue,
    redis,
    concurrency: a.concurrency,
    handlers: {
      noop: async (job) => {
        lateness.push(Date.now() - job.dueAt);
      },
    },
    onEvent: (e) => {
      if (e.kind === 'completed') completed++;
    },
  });
  await Promise.all([producer.ping(), redis.ping()]);
  const report = async () => {
    const n = completed;
    completed = 0;
    if (n > 0 || lateness.length > 0) await send({ type: 'progress', completed: n, lateness: lateness.splice(0) });
  };
  const timer = setInterval(() => void report(), REPORT_EVERY_MS);
  process.on('message', (m: { type?: string }) => {
    if (m.type === 'go') void worker.start();
    if (m.type !== 'stop') return;
    clearInterval(timer);
    void (async () => {
      await worker.stop();
      await report();
      producer.disconnect();
      redis.disconnect();
      await send({ type: 'done' });
      process.disconnect();
    })();
  });
  await send({ type: 'ready' });
}

main().catch(async (err: unknown) => {
  await send({ type: 'error', message: err instanceof Error ? (err.stack ?? err.message) : String(err) });
  process.exit(1);
});
