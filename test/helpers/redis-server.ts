// Starts a private redis-server on a free local port for tests that must
// change its settings, stop it or restart it; loopback only, no persistence
// unless asked.
// With `aof`, it persists as production should run it (appendonly yes,
// appendfsync everysec) into a temporary directory, and can be shut down
// (SHUTDOWN NOSAVE) or killed (SIGKILL) and started again on the same port
// with the same directory, to test what a restart keeps. A killed process
// loses nothing the OS already holds; to stand for a host crash, which loses
// the writes since the last fsync, a test can cut the AOF back while the
// server is down (Redis loads a truncated AOF, dropping a cut MULTI block).
// To stand for a hung server (one that keeps its connections open and answers
// nothing), a test can pause it (SIGSTOP) and resume it (SIGCONT).
import { type ChildProcess, spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { mkdtempSync, readFileSync, rmSync, statSync, truncateSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freePort } from '../../src/core/free-port.js';
import { waitFor } from './redis.js';

export { freePort };

export type PrivateRedis = {
  port: number;
  url: string;
  /** Kills the server (if running) and removes its directory. */
  stop(): Promise<void>;
  /** SIGKILL: no fsync, up to about a second of AOF writes is lost. */
  kill(): Promise<void>;
  /** SHUTDOWN NOSAVE: no RDB snapshot; the AOF is flushed and fsynced by the shutdown. */
  shutdownNoSave(): Promise<void>;
  /** Starts the server again on the same port and directory (after kill or shutdown). */
  restart(): Promise<void>;
  /** Whether the server process runs. */
  running(): boolean;
  /** SIGSTOP: the server hangs; the kernel still accepts connections and data for it. */
  pause(): void;
  /** SIGCONT after pause(): the server reads and runs what waited on its sockets. */
  resume(): void;
  /** Size in bytes of the AOF file being appended to (aof mode). */
  aofBytes(): number;
  /** Cuts the AOF file being appended to back to `bytes` (aof mode, server down). */
  truncateAof(bytes: number): void;
};

export async function startPrivateRedis(extraArgs: string[] = [], options: { aof?: boolean } = {}): Promise<PrivateRedis> {
  // A port outside the OS's ephemeral range, as any of these servers may be
  // restarted: while it is down, an outgoing socket could otherwise take its
  // port (even connect to itself, as a client retrying that port can on loopback).
  const port = await freePortBelowEphemeral();
  const dir = options.aof ? mkdtempSync(join(tmpdir(), 'ots-redis-')) : null;
  const persistence = dir ? ['--appendonly', 'yes', '--appendfsync', 'everysec', '--dir', dir] : ['--appendonly', 'no', '--dir', tmpdir()]; // never a dump.rdb in the working directory
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', ...persistence, ...extraArgs];
  const url = `redis://127.0.0.1:${port}`;
  let proc = await launch(args, url, port);
  const exited = (p: ChildProcess) => (p.exitCode !== null || p.signalCode !== null ? Promise.resolve() : new Promise((r) => p.once('exit', r)));

  return {
    port,
    url,
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null) {
        proc.kill('SIGKILL');
        await exited(proc);
      }
      if (dir) rmSync(dir, { recursive: true, force: true });
    },
    async kill() {
      proc.kill('SIGKILL');
      await exited(proc);
    },
    async shutdownNoSave() {
      const c = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
      c.on('error', () => {}); // the server closes the connection as it goes
      await c.connect();
      await c.call('SHUTDOWN', 'NOSAVE').catch(() => {});
      c.disconnect();
      await exited(proc);
    },
    async restart() {
      proc = await launch(args, url, port);
    },
    running: () => proc.exitCode === null && proc.signalCode === null,
    pause() {
      proc.kill('SIGSTOP');
    },
    resume() {
      proc.kill('SIGCONT');
    },
    aofBytes: () => statSync(incrAof(dir)).size,
    truncateAof(bytes) {
      if (proc.exitCode === null && proc.signalCode === null) throw new Error('truncateAof: stop the server first');
      truncateSync(incrAof(dir), bytes);
    },
  };
}

/** The incremental AOF file Redis 7 appends to, from its manifest. */
function incrAof(dir: string | null): string {
  if (!dir) throw new Error('this redis-server runs without an AOF');
  const aofDir = join(dir, 'appendonlydir');
  const manifest = readFileSync(join(aofDir, 'appendonly.aof.manifest'), 'utf8');
  const incr = [...manifest.matchAll(/^file (\S+) seq \d+ type i$/gm)].at(-1)?.[1];
  if (!incr) throw new Error(`no incremental AOF file in ${aofDir}`);
  return join(aofDir, incr);
}

async function launch(args: string[], url: string, port: number): Promise<ChildProcess> {
  const proc: ChildProcess = spawn('redis-server', args, { stdio: 'ignore' });
  const probe = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  probe.on('error', () => {}); // refused until the server is up; the loop below retries
  const up = await waitFor(
    async () => {
      try {
        if (probe.status !== 'ready') await probe.connect();
        // PING answers LOADING while the AOF is read back; the server is up when it answers PONG.
        return (await probe.ping()) === 'PONG';
      } catch {
        return false;
      }
    },
    10_000,
    50,
  );
  probe.disconnect();
  if (!up) {
    proc.kill('SIGKILL');
    throw new Error(`private redis-server on port ${port} did not start`);
  }
  return proc;
}

/** A free port in 20000-32767, below Linux's default ephemeral range (32768-60999). */
async function freePortBelowEphemeral(): Promise<number> {
  for (let i = 0; i < 50; i++) {
    const port = 20_000 + Math.floor(Math.random() * 12_768);
    const free = await new Promise<boolean>((resolve) => {
      const s = createServer();
      s.once('error', () => resolve(false));
      s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
    });
    if (free) return port;
  }
  throw new Error('no free port found in 20000-32767');
}
