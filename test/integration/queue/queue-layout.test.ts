// A change of QUEUE_SHARDS over live queue data is refused at start (review
// 2026-11-23, F12): checkQueueLayout records each queue's shard count on first
// start and throws a QueueLayoutError naming the queue and both counts when a
// later start is configured with another one (jobs are spread by hash mod the
// shard count: fewer shards strand jobs, more run a second copy of them).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedis, type RedisClient } from '../../../src/core/redis.js';
import { shardCountKey } from '../../../src/queue/keys.js';
import { QueueLayoutError, checkQueueLayout } from '../../../src/queue/checks/layout-check.js';
import { createQueue } from '../../../src/queue/producer/queue.js';
import { REDIS_URL, dropQueue, uniqueQueueName } from '../../helpers/redis.js';

let redis: RedisClient;
const names: string[] = [];
beforeAll(() => {
  redis = createRedis(REDIS_URL, 'queue-layout-test');
});
afterAll(async () => {
  for (const n of names) await dropQueue(redis, n);
  redis.disconnect();
});

function queueName(tag: string): string {
  const name = uniqueQueueName(tag);
  names.push(name);
  return name;
}

const queueOf = (name: string, shards: number) => createQueue(redis, { name, shards, types: { t: {} } });

describe('the shard count of a queue', () => {
  it('is recorded on first start, and a start with another count is refused naming the queue and both counts', async () => {
    const name = queueName('shards');
    const first = queueOf(name, 4);
    await first.schedule({ id: 'live', type: 't', delayMs: 60_000 });
    await checkQueueLayout(redis, [first]);
    await checkQueueLayout(redis, [queueOf(name, 4)]); // the same count starts again

    for (const shards of [2, 8]) {
      const err = await checkQueueLayout(redis, [queueOf(name, shards)]).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(QueueLayoutError);
      expect((err as Error).message).toContain(`${name} (written with 4, configured ${shards})`);
    }
    // Refusing changes nothing: the recorded count stays, the job stays where it is.
    expect(await redis.get(shardCountKey('dq', name))).toBe('4');
    expect(await first.get('live')).toMatchObject({ state: 'pending' });
  });

  it('names only the queues whose count changed', async () => {
    const [same, changed] = [queueName('same'), queueName('changed')];
    await checkQueueLayout(redis, [queueOf(same, 1), queueOf(changed, 1)]);
    const err = await checkQueueLayout(redis, [queueOf(same, 1), queueOf(changed, 3)]).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(QueueLayoutError);
    expect((err as Error).message).toContain(`${changed} (written with 1, configured 3)`);
    expect((err as Error).message).not.toContain(same);
  });

  it('is kept per key prefix: the same queue name under another prefix is another queue', async () => {
    const name = queueName('prefix');
    const other = `t-layout-${name.slice(-8)}`;
    const underOther = (shards: number) => createQueue(redis, { name, shards, prefix: other, types: { t: {} } });
    try {
      await checkQueueLayout(redis, [queueOf(name, 2)]);
      await checkQueueLayout(redis, [underOther(5)]);
      await expect(checkQueueLayout(redis, [underOther(2)])).rejects.toThrow(`${name} (written with 5, configured 2)`);
      await expect(checkQueueLayout(redis, [queueOf(name, 5)])).rejects.toThrow(`${name} (written with 2, configured 5)`);
      expect(await redis.get(shardCountKey(other, name))).toBe('5');
      expect(await redis.get(shardCountKey('dq', name))).toBe('2');
    } finally {
      await dropQueue(redis, name, other);
    }
  });
});
