// Zero-setup start: no DATABASE_URL, so the service runs its embedded
// PostgreSQL (PGlite) under DATA_DIR, migrates it, and an order is created and
// cancelled on it; the data survives a restart.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { REDIS_URL, dropPrefix, redisClient, waitFor } from '../helpers/redis.js';
import { orderBody } from '../helpers/bodies.js';
import { freePort } from '../helpers/redis-server.js';

const MAIN = fileURLToPath(new URL('../../src/main.ts', import.meta.url));
const dataDir = mkdtempSync(join(tmpdir(), 'ots-embedded-'));
const prefix = `emb${randomBytes(3).toString('hex')}`;

afterAll(async () => {
  rmSync(dataDir, { recursive: true, force: true });
  const r = redisClient('embedded-cleanup');
  await dropPrefix(r, prefix);
  r.disconnect();
});

async function startMain(port: number) {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PORT: String(port),
    HOST: '127.0.0.1',
    REDIS_URL,
    DATA_DIR: dataDir,
    QUEUE_PREFIX: prefix,
    LOG_LEVEL: 'info',
  };
  delete env.DATABASE_URL;
  const child = spawn(process.execPath, ['--import', 'tsx', MAIN], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  const exited = new Promise<number | null>((r) => child.once('exit', (c) => r(c)));
  const up = await waitFor(() => out.includes('service started') || child.exitCode !== null, 60_000, 100);
  return { child, exited, output: () => out, up: up && child.exitCode === null };
}

describe('embedded database', () => {
  it('starts without DATABASE_URL, migrates, runs an order to cancellation, keeps data across restarts', async () => {
    const port = await freePort();
    const first = await startMain(port);
    expect(first.up, first.output()).toBe(true);
    expect(first.output()).toContain('using the embedded PostgreSQL');
    expect(first.output()).toContain('"migration":"20261122000000_orders"');
    const base = `http://127.0.0.1:${port}`;
    const created = await fetch(`${base}/orders`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(orderBody({ customerId: 'emb', paymentTimeoutSeconds: 1 })),
    });
    expect(created.status).toBe(201);
    const { id } = (await created.json()) as { id: string };
    const cancelled = await waitFor(
      async () => {
        const o = (await (await fetch(`${base}/orders/${id}`)).json()) as { status: string };
        return o.status === 'CANCELLED';
      },
      10_000,
      100,
    );
    expect(cancelled).toBe(true);
    first.child.kill('SIGTERM');
    expect(await first.exited).toBe(0);

    const second = await startMain(port);
    expect(second.up, second.output()).toBe(true);
    expect(second.output()).not.toContain('"msg":"migration applied"');
    const again = (await (await fetch(`${base}/orders/${id}`)).json()) as { status: string; cancelReason: string };
    expect(again).toMatchObject({ status: 'CANCELLED', cancelReason: 'PAYMENT_TIMEOUT' });
    second.child.kill('SIGTERM');
    expect(await second.exited).toBe(0);
  });

  it('refuses to run the api role alone on the embedded database', async () => {
    const port = await freePort();
    const env: NodeJS.ProcessEnv = { ...process.env, PORT: String(port), REDIS_URL, DATA_DIR: dataDir, LOG_LEVEL: 'info' };
    delete env.DATABASE_URL;
    const child = spawn(process.execPath, ['--import', 'tsx', MAIN, 'api'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stderr.on('data', (d) => (out += d));
    const code = await new Promise<number | null>((r) => child.once('exit', (c) => r(c)));
    expect(code).toBe(1);
    expect(out).toMatch(/needs DATABASE_URL/);
  });
});
