// The embedded database is the service's alone: no TCP port, a unix socket in
// an owner-only directory that another local user cannot open and whose one
// connection slot the service keeps, data files 0600 under 0700 directories
// (also over a data directory an earlier version left world-writable), and
// the keys CLI refusing while the service has the database open.
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, readlinkSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { bearer } from '../../helpers/service.js';
import { keysCli, startEmbeddedService } from '../../helpers/embedded-service.js';
import { dropPrefix, redisClient } from '../../helpers/redis.js';
import { freePort } from '../../helpers/redis-server.js';
import { EMBEDDED_DB_LOCK_FILE, EMBEDDED_DB_SOCKET_DIR } from '../../../src/core/embedded-db.js';
import { DEV_KEY_FILE } from '../../../src/service.js';

// A world-readable parent and a DATA_DIR made 0755, as an earlier version
// left it: only the service's own directories may keep other users out.
const root = mkdtempSync(join(tmpdir(), 'ots-embedded-private-'));
chmodSync(root, 0o755);
const dataDir = join(root, 'data');
mkdirSync(dataDir, { mode: 0o755 });
const world = { dataDir, prefix: `embp${randomBytes(3).toString('hex')}` };
const pgliteDir = join(dataDir, 'pglite');
const socketDir = join(dataDir, EMBEDDED_DB_SOCKET_DIR);
const NOBODY = 65534;

afterAll(async () => {
  rmSync(root, { recursive: true, force: true });
  const r = redisClient('embedded-private-cleanup');
  await dropPrefix(r, world.prefix);
  r.disconnect();
});

/** Every entry under dir with its permission bits. */
function modes(dir: string): { path: string; dir: boolean; mode: number }[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true }).map((e) => {
    const path = join(e.parentPath, e.name);
    return { path, dir: e.isDirectory(), mode: statSync(path).mode & 0o777 };
  });
}

/** Ports a process listens on over TCP (IPv4 and IPv6), from /proc. */
function tcpListenPorts(pid: number): number[] {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    const m = /^socket:\[(\d+)\]$/.exec(safeReadlink(`/proc/${pid}/fd/${fd}`));
    if (m) inodes.add(m[1] as string);
  }
  const ports: number[] = [];
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const line of readFileSync(table, 'utf8').trim().split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      const [local, , state, , , , , , inode] = f.slice(1); // local_address rem_address st ... uid timeout inode
      if (state === '0A' && inode && inodes.has(inode)) ports.push(Number.parseInt((local as string).split(':')[1] as string, 16));
    }
  }
  return ports;
}

function safeReadlink(path: string): string {
  try {
    return readlinkSync(path);
  } catch {
    return ''; // the fd closed meanwhile
  }
}

/** Runs a script in a separate node process, as another user when uid is given; returns its output. */
function nodeAs(script: string, uid?: number): string {
  const r = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 20_000, cwd: '/', ...(uid !== undefined && { uid, gid: uid }) });
  return `${r.stdout}${r.stderr}`.trim();
}

// Each test starts the service (and its CLI) as processes on a fresh PGlite:
// tens of seconds on a loaded machine.
describe('embedded database, private to the service', { timeout: 180_000 }, () => {
  it('serves on an owner-only unix socket, no TCP port, one slot held; files 0600; keys CLI refused while it runs', async () => {
    const port = await freePort();
    const svc = await startEmbeddedService(world, port);
    expect(svc.up, svc.output()).toBe(true);
    try {
      const pid = svc.child.pid as number;
      // No TCP listener but the HTTP API: nothing on 127.0.0.1 to dial.
      expect(tcpListenPorts(pid)).toEqual([port]);
      expect(readFileSync(join(dataDir, EMBEDDED_DB_LOCK_FILE), 'utf8').trim()).toBe(String(pid));
      for (const d of [pgliteDir, socketDir]) expect(statSync(d).mode & 0o777, d).toBe(0o700);
      const socket = join(socketDir, '.s.PGSQL.5432');
      expect(statSync(socket).isSocket()).toBe(true);

      // Another local user can neither connect nor read the files (as root, the test can show it).
      if (process.getuid?.() === 0) {
        const dial = `require('net').connect(${JSON.stringify(socket)}).on('connect', () => { console.log('connected'); process.exit(0) }).on('error', (e) => console.log(e.code))`;
        expect(nodeAs(dial, NOBODY)).toBe('EACCES');
        expect(nodeAs(`try { require('fs').readdirSync(${JSON.stringify(pgliteDir)}); console.log('read') } catch (e) { console.log(e.code) }`, NOBODY)).toBe(
          'EACCES',
        );
      }
      // The owner's own second connection finds the one slot taken.
      const intruder = new pg.Client({
        connectionString: `postgresql://x:y@localhost/postgres?host=${encodeURIComponent(socketDir)}`,
        connectionTimeoutMillis: 5_000,
      });
      intruder.on('error', () => {});
      await expect(intruder.connect().then(() => intruder.query('SELECT 1'))).rejects.toThrow();
      await intruder.end().catch(() => {});

      const devKey = readFileSync(join(dataDir, DEV_KEY_FILE), 'utf8').trim();
      const read = await fetch(`http://127.0.0.1:${port}/admin/api-keys`, { headers: bearer(devKey) });
      expect(read.status).not.toBe(500);
      expect((await fetch(`http://127.0.0.1:${port}/orders/00000000-0000-4000-8000-000000000000`, { headers: bearer(devKey) })).status).toBe(404);

      const refused = keysCli(world, ['create', '--name', 'while-running', '--scopes', 'orders:read']);
      expect(refused.status, refused.output).toBe(1);
      expect(refused.output).toContain(`process ${pid} (a running service)`);
      expect(refused.output).toMatch(/admin API .*or stop the service/);
      expect(refused.output).not.toContain('ots_');
    } finally {
      svc.child.kill('SIGTERM');
    }
    expect(await svc.exited).toBe(0);
    expect(readdirSync(dataDir)).not.toContain(EMBEDDED_DB_LOCK_FILE);
    for (const e of modes(pgliteDir)) expect(e.mode, e.path).toBe(e.dir ? 0o700 : 0o600);

    const made = keysCli(world, ['create', '--name', 'after-stop', '--scopes', 'orders:read']);
    expect(made.status, made.output).toBe(0);
    expect(made.output).toMatch(/"key": "ots_/);
  });

  it('tightens a data directory an earlier version left world-writable, and still starts, migrates and serves on it', async () => {
    // The earlier layout: files 0666 under 0755 directories, no socket directory, no lock.
    rmSync(socketDir, { recursive: true, force: true });
    for (const e of modes(pgliteDir)) chmodSync(e.path, e.dir ? 0o755 : 0o666);
    chmodSync(pgliteDir, 0o755);
    expect(modes(pgliteDir).filter((e) => e.mode === 0o666).length).toBeGreaterThan(100);

    const port = await freePort();
    const svc = await startEmbeddedService(world, port);
    try {
      expect(svc.up, svc.output()).toBe(true);
      expect(svc.output()).toContain('using the embedded PostgreSQL');
      expect(statSync(pgliteDir).mode & 0o777).toBe(0o700);
      expect(modes(pgliteDir).filter((e) => e.mode & 0o077)).toEqual([]);
      const devKey = readFileSync(join(dataDir, DEV_KEY_FILE), 'utf8').trim();
      expect((await fetch(`http://127.0.0.1:${port}/orders/00000000-0000-4000-8000-000000000000`, { headers: bearer(devKey) })).status).toBe(404);
    } finally {
      svc.child.kill('SIGTERM');
    }
    expect(await svc.exited).toBe(0);
  });
});
