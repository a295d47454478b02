// Runs one role of the service as a separate process (as in production, where
// API and workers scale apart), for tests whose timing must not share an event
// loop with the load they generate, and for fault injection: a child can be
// killed (SIGKILL) and started again with the same role and environment.
import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { waitFor } from './redis.js';

const MAIN = fileURLToPath(new URL('../../src/main.ts', import.meta.url));

export type ChildRole = 'api' | 'worker' | 'all';

export type ChildService = {
  readonly role: ChildRole;
  readonly env: Readonly<Record<string, string>>;
  child: ChildProcess;
  output(): string;
  /** How the process ended (exit code or signal), or null while it runs. */
  ended(): string | null;
  /** SIGTERM (graceful shutdown); resolves with the exit code. */
  stop(): Promise<number | null>;
  /** Sends `signal` (default SIGKILL) and resolves when the process is gone. */
  kill(signal?: NodeJS.Signals): Promise<void>;
};

export async function startChildService(role: ChildRole, env: Record<string, string>): Promise<ChildService> {
  const child = spawn(process.execPath, ['--import', 'tsx', MAIN, role], {
    // No load shedding: these processes share two cores with the suites driving them (its own test turns it on).
    env: { ...process.env, LOG_LEVEL: 'info', API_SHED_EVENT_LOOP_DELAY_MS: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout?.on('data', (d) => (out += d));
  child.stderr?.on('data', (d) => (out += d));
  const gone = () => child.exitCode !== null || child.signalCode !== null;
  const exited = new Promise<number | null>((r) => child.once('exit', (c) => r(c)));
  const up = await waitFor(() => out.includes('service started') || gone(), 60_000, 50);
  if (!up || gone()) {
    if (!gone()) child.kill('SIGKILL');
    throw new Error(`${role} process did not start:\n${out}`);
  }
  return {
    role,
    env,
    child,
    output: () => out,
    ended: () => (gone() ? String(child.exitCode ?? child.signalCode) : null),
    async stop() {
      if (!gone()) child.kill('SIGTERM');
      return exited;
    },
    async kill(signal = 'SIGKILL') {
      if (!gone()) child.kill(signal);
      await exited;
    },
  };
}

/** A new process with the role and environment of `previous` (which should be gone). */
export function restartChildService(previous: ChildService): Promise<ChildService> {
  return startChildService(previous.role, { ...previous.env });
}
