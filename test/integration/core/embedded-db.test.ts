// Zero-setup start: no DATABASE_URL, so the service runs its embedded
// PostgreSQL (PGlite) under DATA_DIR, migrates it, and an order is created and
// cancelled on it with the development key it made; the data survives a
// restart; the keys CLI works on it while the service is down.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { REDIS_URL, dropPrefix, redisClient, waitFor } from '../../helpers/redis.js';
import { orderBody } from '../../helpers/bodies.js';
import { keysCli as keysCliIn, startEmbeddedService } from '../../helpers/embedded-service.js';
import { freePort } from '../../helpers/redis-server.js';
import { bearer } from '../../helpers/service.js';
import { KEY_PATTERN } from '../../../src/core/auth/api-keys.js';
import { DEV_KEY_FILE } from '../../../src/service.js';

const MAIN = fileURLToPath(new URL('../../../src/main.ts', import.meta.url));
const dataDir = mkdtempSync(join(tmpdir(), 'ots-embedded-'));
const prefix = `emb${randomBytes(3).toString('hex')}`;
const world = { dataDir, prefix };

afterAll(async () => {
  rmSync(dataDir, { recursive: true, force: true });
  const r = redisClient('embedded-cleanup');
  await dropPrefix(r, prefix);
  r.disconnect();
});

const keysCli = (args: string[]) => keysCliIn(world, args);
const startMain = (port: number) => startEmbeddedService(world, port);

// Starts the service twice and the CLI thrice as processes: tens of seconds on a loaded machine.
describe('embedded database', { timeout: 180_000 }, () => {
  it('starts without DATABASE_URL, migrates, makes a development key once, runs an order to cancellation, keeps data across restarts', async () => {
    const port = await freePort();
    const first = await startMain(port);
    expect(first.up, first.output()).toBe(true);
    expect(first.output()).toContain('using the embedded PostgreSQL');
    expect(first.output()).toContain('"migration":"20261122000000_orders"');
    // The newcomer's key: kept under the data directory, named in the log, never written into it.
    const devKey = readFileSync(join(dataDir, DEV_KEY_FILE), 'utf8').trim();
    expect(devKey).toMatch(KEY_PATTERN);
    expect(first.output()).toContain(join(dataDir, DEV_KEY_FILE));
    expect(first.output()).not.toContain(devKey.slice(-43));
    expect(statSync(join(dataDir, DEV_KEY_FILE)).mode & 0o077).toBe(0);
    const base = `http://127.0.0.1:${port}`;
    const json = { 'content-type': 'application/json' };
    const body = JSON.stringify(orderBody({ customerId: 'emb', paymentTimeoutSeconds: 1 }));
    expect((await fetch(`${base}/orders`, { method: 'POST', headers: json, body })).status).toBe(401);
    const created = await fetch(`${base}/orders`, { method: 'POST', headers: { ...json, ...bearer(devKey) }, body });
    expect(created.status).toBe(201);
    const { id } = (await created.json()) as { id: string };
    const read = (key: string) => fetch(`${base}/orders/${id}`, { headers: bearer(key) });
    const cancelled = await waitFor(
      async () => {
        const o = (await (await read(devKey)).json()) as { status: string };
        return o.status === 'CANCELLED';
      },
      10_000,
      100,
    );
    expect(cancelled).toBe(true);
    first.child.kill('SIGTERM');
    expect(await first.exited).toBe(0);

    // The operators' CLI, on the same embedded database while the service is down.
    const made = keysCli(['create', '--name', 'reader', '--scopes', 'orders:read']);
    expect(made.status, made.output).toBe(0);
    const reader = /"key": "(ots_[^"]+)"/.exec(made.output)?.[1] as string;
    expect(reader).toMatch(KEY_PATTERN);
    const listed = keysCli(['list']);
    expect(listed.status, listed.output).toBe(0);
    expect(listed.output).toContain('"name":"reader"');
    expect(listed.output).toContain('"name":"development"');
    expect(listed.output).not.toContain('ots_');
    expect(keysCli(['create', '--name', 'x', '--scopes', 'orders:everything']).status).toBe(2);
    const other = keysCli(['create', '--name', 'other-shop', '--scopes', 'orders:read', '--client', 'shop-b']);
    expect(other.output).toContain('"client": "shop-b"');
    const ofShop = keysCli(['list', '--client', 'shop-b']);
    expect(ofShop.output.trim().split('\n')).toEqual([expect.stringContaining('"name":"other-shop","client":"shop-b"')]);
    expect(keysCli(['create', '--name', 'x', '--scopes', 'orders:read', '--client', 'a b']).status).toBe(2);

    const second = await startMain(port);
    expect(second.up, second.output()).toBe(true);
    expect(second.output()).not.toContain('"msg":"migration applied"');
    expect(second.output()).not.toContain('made a development API key');
    const again = (await (await read(reader)).json()) as { status: string; cancelReason: string };
    expect(again).toMatchObject({ status: 'CANCELLED', cancelReason: 'PAYMENT_TIMEOUT' });
    const refused = await fetch(`${base}/orders`, { method: 'POST', headers: { ...json, ...bearer(reader) }, body });
    expect(refused.status).toBe(403);
    expect(await refused.json()).toMatchObject({ code: 'INSUFFICIENT_SCOPE', scope: 'orders:write' });
    second.child.kill('SIGTERM');
    expect(await second.exited).toBe(0);

    const revoked = keysCli(['revoke', /"id":"([^"]+)","name":"reader"/.exec(listed.output)?.[1] as string]);
    expect(revoked.status, revoked.output).toBe(0);
    expect(revoked.output).toMatch(/"revokedAt":"\d{4}-/);
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
