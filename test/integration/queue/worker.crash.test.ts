// A worker process killed with SIGKILL while holding claimed jobs: they are
// delivered again after the lease, and a late ack from the dead worker's lease
// does not remove the new delivery.
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { runAck, runExtend, runNack } from '../../../src/queue/scripts/scripts.js';
import { gate, type Harness, harness } from '../../helpers/queues.js';
import { waitFor } from '../../helpers/redis.js';

let h: Harness;
afterEach(async () => h?.close());

const CHILD = fileURLToPath(new URL('../../helpers/crash-worker.ts', import.meta.url));

function startChild(queueName: string, leaseMs: number) {
  const child = spawn(process.execPath, ['--import', 'tsx', CHILD, queueName, String(leaseMs)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const claims: { id: string; token: number }[] = [];
  let ready = false;
  createInterface({ input: child.stdout }).on('line', (line) => {
    if (line === 'READY') ready = true;
    else claims.push(JSON.parse(line));
  });
  return { child, claims, isReady: () => ready };
}

describe('worker crash', () => {
  it('redelivers a killed worker’s jobs after the lease and fences its late ack', async () => {
    h = harness('crash', { t: {} });
    const leaseMs = 800;
    const c = startChild(h.queue.name, leaseMs);
    expect(await waitFor(c.isReady, 15_000)).toBe(true);
    await h.queue.scheduleMany(Array.from({ length: 5 }, (_, i) => ({ id: `c${i}`, type: 't', delayMs: 0 })));
    expect(await waitFor(() => c.claims.length === 5, 5_000)).toBe(true);
    const stats = await h.queue.stats();
    expect(stats.inFlight).toBe(5);
    c.child.kill('SIGKILL');
    const killedAt = Date.now();
    await new Promise((r) => c.child.once('exit', r));

    // A second worker picks the jobs up once the dead worker's lease has run out.
    const held = gate();
    const redelivered = new Map<string, { token: number; at: number; attempts: number }>();
    await h.startWorker(
      {
        t: async (job) => {
          redelivered.set(job.id, { token: job.token, at: Date.now(), attempts: job.attempts });
          if (job.id === 'c0') await held.promise;
        },
      },
      { leaseMs: 30_000 },
    );
    expect(await waitFor(() => redelivered.size === 5, 10_000)).toBe(true);
    for (const [id, d] of redelivered) {
      expect(d.at - killedAt).toBeGreaterThanOrEqual(leaseMs - 300); // not before the lease (minus start-up slack)
      const old = c.claims.find((x) => x.id === id);
      expect(d.token).toBeGreaterThan(old?.token ?? Number.POSITIVE_INFINITY);
      expect(d.attempts).toBe(2);
    }

    // c0 is now held by the new worker. The dead worker's ack, nack and extend change nothing.
    const k = h.queue.keys[0]!;
    const stale = c.claims.find((x) => x.id === 'c0')!;
    expect(await runAck(h.redis, k, [stale])).toEqual({ acked: 0, stale: ['c0'] });
    expect((await runNack(h.redis, k, 'c0', stale.token, 'dead', 0, 'late')).code).toBe(0);
    expect(await runExtend(h.redis, k, 'c0', stale.token, 60_000)).toBeNull();
    const c0 = await h.queue.get('c0');
    expect(c0?.state).toBe('in_flight');
    expect(c0?.leaseUntil).toBeLessThan(Date.now() + 31_000);

    held.open();
    expect(await waitFor(async () => (await h.queue.get('c0')) === null, 3_000)).toBe(true);
    const s = await h.queue.stats();
    expect(s).toMatchObject({ pending: 0, inFlight: 0, dead: 0 });
  });

  it('dead-letters a job whose deliveries keep losing their lease', async () => {
    h = harness('poison', { t: { maxAttempts: 2 } });
    await h.queue.schedule({ id: 'p', type: 't', delayMs: 0 });
    for (let i = 0; i < 2; i++) {
      const c = startChild(h.queue.name, 300);
      expect(await waitFor(() => c.claims.length === 1, 15_000)).toBe(true);
      c.child.kill('SIGKILL');
      await new Promise((r) => c.child.once('exit', r));
    }
    let ran = 0;
    await h.startWorker({ t: () => void ran++ });
    expect(await waitFor(async () => (await h.queue.get('p'))?.state === 'dead', 5_000)).toBe(true);
    expect(ran).toBe(0);
    expect((await h.queue.get('p'))?.lastError).toMatch(/lease expired/);
  });
});
