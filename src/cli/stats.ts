// The `stats` subcommand: the queue table in the terminal, for operators on a
// box without a browser. `--watch` redraws it every 2 s until Ctrl-C.
import { serviceQueues } from '../composition/service-queues.js';
import type { Config } from '../config.js';
import { createRedis, redisTargetOf } from '../core/redis.js';
import type { QueueStats } from '../queue/index.js';

const WATCH_EVERY_MS = 2_000;

export function formatStats(rows: readonly QueueStats[], now = Date.now()): string {
  const head = ['queue', 'shard', 'pending', 'due now', 'in flight', 'dead', 'next due in', 'oldest lag'];
  const body = rows.map((r) => [
    r.queue,
    String(r.shard),
    String(r.pending),
    String(r.dueNow),
    String(r.inFlight),
    String(r.dead),
    r.nextDueAt === null ? '-' : duration(r.nextDueAt - now),
    r.oldestDueLagMs ? duration(r.oldestDueLagMs) : '-',
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((row) => (row[i] ?? '').length)));
  const line = (cells: string[]) => cells.map((c, i) => (i < 2 ? c.padEnd(widths[i] ?? 0) : c.padStart(widths[i] ?? 0))).join('  ');
  return [line(head), line(widths.map((w) => '-'.repeat(w))), ...body.map(line)].join('\n');
}

function duration(ms: number): string {
  if (ms <= 0) return 'now';
  if (ms < 1_000) return `${Math.round(ms)} ms`;
  if (ms < 120_000) return `${(ms / 1_000).toFixed(1)} s`;
  if (ms < 7_200_000) return `${Math.round(ms / 60_000)} min`;
  return `${(ms / 3_600_000).toFixed(1)} h`;
}

export async function statsCommand(config: Config, watch: boolean, out: NodeJS.WritableStream = process.stdout): Promise<void> {
  const redis = createRedis(redisTargetOf(config), 'ots-stats');
  const queues = serviceQueues(redis, config);
  const draw = async () => {
    const rows = (await Promise.all(queues.map(async (q) => [await q.stats(), ...(q.shards > 1 ? await q.shardStats() : [])]))).flat();
    const table = formatStats(rows);
    out.write(watch ? `\x1b[2J\x1b[H${new Date().toISOString()}\n\n${table}\n` : `${table}\n`);
  };
  try {
    await draw();
    if (!watch) return;
    await new Promise<void>((resolve) => {
      const t = setInterval(() => void draw().catch((err: unknown) => out.write(`stats failed: ${String(err)}\n`)), WATCH_EVERY_MS);
      process.once('SIGINT', () => {
        clearInterval(t);
        resolve();
      });
    });
  } finally {
    redis.disconnect();
  }
}
