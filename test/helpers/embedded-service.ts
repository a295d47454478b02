// The service and its keys CLI as separate processes on the embedded database
// (DATABASE_URL removed from their environment) under a test's own DATA_DIR.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { REDIS_URL, waitFor } from './redis.js';

const MAIN = fileURLToPath(new URL('../../src/main.ts', import.meta.url));

export type EmbeddedWorld = { dataDir: string; prefix: string };

export type EmbeddedService = { child: ChildProcess; exited: Promise<number | null>; output(): string; up: boolean };

function envOf(world: EmbeddedWorld, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, REDIS_URL, DATA_DIR: world.dataDir, QUEUE_PREFIX: world.prefix, ...extra };
  delete env.DATABASE_URL;
  return env;
}

/** `main keys ...` on the embedded database under the world's DATA_DIR. */
export function keysCli(world: EmbeddedWorld, args: string[]): { status: number | null; output: string } {
  const r = spawnSync(process.execPath, ['--import', 'tsx', MAIN, 'keys', ...args], { env: envOf(world), encoding: 'utf8', timeout: 60_000 });
  return { status: r.status, output: `${r.stdout}${r.stderr}` };
}

/** The all-in-one service on the embedded database; `up` once it logged that it started. */
export async function startEmbeddedService(world: EmbeddedWorld, port: number): Promise<EmbeddedService> {
  const env = envOf(world, { PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'info' });
  const child = spawn(process.execPath, ['--import', 'tsx', MAIN], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  const exited = new Promise<number | null>((r) => child.once('exit', (c) => r(c)));
  const up = await waitFor(() => out.includes('service started') || child.exitCode !== null, 60_000, 100);
  return { child, exited, output: () => out, up: up && child.exitCode === null };
}
