// A worker process for the lateness scenario (forked with `node --import tsx`).
// argv[2]: JSON { stores, ids, concurrency }. Over IPC it says 'ready' once
// claiming, streams lateness samples every 200 ms, and on 'stop' stops its
// worker, sends what is left and 'done', then exits.
import type { BenchStores, QueueIds } from './bench-engine.js';
import { openEngine } from './open-engine.js';

export type ChildArgs = { stores: BenchStores; ids: QueueIds; concurrency: number; processes: number };
export type ChildMessage =
  { type: 'ready'; pid: number } | { type: 'samples'; wall: number[]; engine: number[] } | { type: 'done'; pid: number } | { type: 'error'; message: string };

const FLUSH_EVERY_MS = 200;

function send(m: ChildMessage): Promise<void> {
  return new Promise((resolve) => {
    if (!process.send) return resolve();
    process.send(m, undefined, {}, () => resolve());
  });
}

async function main(): Promise<void> {
  const args = JSON.parse(process.argv[2] ?? '') as ChildArgs;
  const queue = openEngine(args.stores, args.ids);
  await queue.init();
  const wall: number[] = [];
  const engine: number[] = [];
  const worker = await queue.prepareWorker(
    args.concurrency,
    {
      onStart(wallMs, engineMs) {
        wall.push(wallMs);
        if (engineMs !== undefined) engine.push(engineMs);
      },
    },
    args.processes,
  );
  const flush = async () => {
    if (wall.length > 0 || engine.length > 0) await send({ type: 'samples', wall: wall.splice(0), engine: engine.splice(0) });
  };
  const flusher = setInterval(() => void flush(), FLUSH_EVERY_MS);
  await worker.start();
  await send({ type: 'ready', pid: process.pid });

  process.on('message', (m: { type?: string }) => {
    if (m.type !== 'stop') return;
    clearInterval(flusher);
    void (async () => {
      await worker.stop();
      await flush();
      await queue.close();
      await send({ type: 'done', pid: process.pid });
      process.disconnect();
    })();
  });
}

main().catch(async (err: unknown) => {
  await send({ type: 'error', message: err instanceof Error ? (err.stack ?? err.message) : String(err) });
  process.exit(1);
});
