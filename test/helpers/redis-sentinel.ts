// Starts a private Redis Sentinel set for failover tests: a master, one replica
// (--replicaof) and three sentinels (quorum 2), all redis-server processes on
// loopback ports below the ephemeral range, without persistence, with their
// config and logs in one temporary directory. It fails the master over
// (SENTINEL FAILOVER) or kills it (SIGKILL), waiting each time until all three
// sentinels name the new master and that node answers ROLE master; a killed
// node can be started again as a replica of the new master. Every wait is
// bounded and fails with what the sentinels and nodes said last, and their logs.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { waitFor } from './redis.js';

const HOST = '127.0.0.1';
// A master unanswered this long is down for a sentinel; a failover may take this
// long before another is tried. Short, so a test fails over in seconds.
const DOWN_AFTER_MS = 1_000;
const FAILOVER_TIMEOUT_MS = 5_000;
const START_TIMEOUT_MS = 10_000;
// Sentinels find each other through hello messages every 2 s.
const DISCOVERY_TIMEOUT_MS = 20_000;
const PROMOTION_TIMEOUT_MS = 20_000;
// A kill needs DOWN_AFTER_MS to be noticed, then a vote; a split vote is tried
// again only after 2 x FAILOVER_TIMEOUT_MS.
const ELECTION_TIMEOUT_MS = 45_000;
// After SENTINEL FAILOVER a sentinel turns the old master into a replica only
// 8 s after the switch (SENTINEL_PUBLISH_PERIOD * 4; about 10 s here), then it syncs.
const HEALTHY_TIMEOUT_MS = 30_000;
const POLL_MS = 50;

export type Switch = {
  from: number;
  to: number;
  /** ms from the fault until all sentinels named `to` and it answered ROLE master. */
  ms: number;
};

export type SentinelSet = {
  readonly name: string;
  /** The sentinels, as RedisTarget.sentinels takes them. */
  readonly sentinels: readonly { host: string; port: number }[];
  /** The sentinels as REDIS_SENTINELS takes them: "127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3". */
  readonly sentinelsEnv: string;
  /** Port of the master as of the start or the last failover / kill. */
  master(): number;
  /** The master's port as the first sentinel that answers names it now. */
  namedMaster(): Promise<number>;
  /** Ports of the running nodes other than the master. */
  replicas(): number[];
  /**
   * SENTINEL FAILOVER; resolves once the replica is the master everywhere. The
   * old master stays a (writable) master until a sentinel turns it into a
   * replica about 10 s later: waitHealthy() before the next fault.
   */
  failover(): Promise<Switch>;
  /**
   * SIGKILLs the master; resolves once the sentinels elected a new one.
   * `onKilled` runs after the process is gone and before the wait (a test
   * resumes a paused replica there, so it cannot sync from the old master first).
   */
  killMaster(options?: { onKilled?: () => void | Promise<void> }): Promise<Switch>;
  /** Starts the killed nodes again on their ports as replicas of the current master; waits until healthy. */
  restartKilled(): Promise<void>;
  /** Until every running non-master node replicates the master with its link up and all sentinels see it as a good replica. */
  waitHealthy(timeoutMs?: number): Promise<void>;
  /** Until every running replica has received everything the master has written so far. */
  waitReplicated(timeoutMs?: number): Promise<void>;
  /** SIGSTOP / SIGCONT a node: it stops reading its sockets without closing them. */
  pause(port: number): void;
  resume(port: number): void;
  /** A plain connection to one node (reused; the set closes it). */
  node(port: number): Redis;
  /** The last lines of every log, for failure messages. */
  logs(lines?: number): string;
  /** Kills every process and removes the directory. */
  stop(): Promise<void>;
};

type Proc = { port: number; dir: string; logFile: string; child: ChildProcess | null; killed: boolean };

export async function startSentinelSet(name = 'mymaster'): Promise<SentinelSet> {
  const root = mkdtempSync(join(tmpdir(), 'ots-sentinel-'));
  const ports = await distinctPorts(5);
  const [masterPort, replicaPort, ...sentinelPorts] = ports as [number, number, number, number, number];
  const nodes = new Map<number, Proc>();
  const sentinels: Proc[] = [];
  const clients = new Map<number, Redis>();
  let current = masterPort;
  // A test that dies without stop() must not leave redis-servers behind.
  const killAll = () => {
    for (const p of [...nodes.values(), ...sentinels]) {
      p.child?.kill('SIGCONT');
      p.child?.kill('SIGKILL');
    }
  };
  process.once('exit', killAll);

  const node = (port: number): Redis => {
    let c = clients.get(port);
    if (!c) {
      // Bounded calls on a connection that keeps trying: the node may be down for a while.
      c = new Redis(port, HOST, { maxRetriesPerRequest: 0, commandTimeout: 1_000, connectTimeout: 1_000, retryStrategy: () => 100 });
      c.on('error', () => {}); // a node down is what these tests are about; the polls report it
      clients.set(port, c);
    }
    return c;
  };
  const ask = async (port: number, ...args: (string | number)[]): Promise<unknown> => node(port).call(String(args[0]), ...args.slice(1));

  const logs = (lines = 15) => [...nodes.values(), ...sentinels].map((p) => `--- ${p.logFile}\n${tail(p.logFile, lines)}`).join('\n');

  async function startNode(port: number, replicaOf: number | null): Promise<void> {
    const dir = join(root, `node-${port}`);
    mkdirSync(dir, { recursive: true });
    const p: Proc = nodes.get(port) ?? { port, dir, logFile: join(dir, 'redis.log'), child: null, killed: false };
    nodes.set(port, p);
    // No diskless-sync delay: a (re)starting replica syncs at once instead of 5 s later.
    const args = [
      '--port',
      String(port),
      '--bind',
      HOST,
      '--save',
      '',
      '--appendonly',
      'no',
      '--repl-diskless-sync-delay',
      '0',
      '--dir',
      dir,
      '--logfile',
      p.logFile,
    ];
    if (replicaOf !== null) args.push('--replicaof', HOST, String(replicaOf));
    p.child = spawn('redis-server', args, { stdio: 'ignore' });
    p.killed = false;
    await answers(p, `redis-server on port ${port}`);
  }

  async function startSentinel(port: number): Promise<void> {
    const dir = join(root, `sentinel-${port}`);
    mkdirSync(dir, { recursive: true });
    const conf = join(dir, 'sentinel.conf'); // sentinel rewrites it with what it learns
    const p: Proc = { port, dir, logFile: join(dir, 'sentinel.log'), child: null, killed: false };
    sentinels.push(p);
    writeFileSync(
      conf,
      [
        `port ${port}`,
        `bind ${HOST}`,
        `dir ${dir}`,
        `logfile ${p.logFile}`,
        `sentinel monitor ${name} ${HOST} ${masterPort} 2`,
        `sentinel down-after-milliseconds ${name} ${DOWN_AFTER_MS}`,
        `sentinel failover-timeout ${name} ${FAILOVER_TIMEOUT_MS}`,
        `sentinel parallel-syncs ${name} 1`,
        '',
      ].join('\n'),
    );
    p.child = spawn('redis-server', [conf, '--sentinel'], { stdio: 'ignore' });
    await answers(p, `sentinel on port ${port}`);
  }

  /** Waits until the process answers PING; kills it and throws if it does not. */
  async function answers(p: Proc, what: string): Promise<void> {
    const up = await waitFor(async () => !gone(p) && (await ask(p.port, 'PING').catch(() => null)) === 'PONG', START_TIMEOUT_MS, POLL_MS);
    if (!up) {
      p.child?.kill('SIGKILL');
      throw new Error(`${what} did not start (${gone(p) ? `exited ${p.child?.exitCode ?? p.child?.signalCode}` : 'no PONG'}):\n${tail(p.logFile, 20)}`);
    }
  }

  /** Fails with `what`, the state `describe()` reports and the logs when `check` does not hold within `ms`. */
  async function expectWithin(what: string, ms: number, check: () => Promise<boolean>, describe: () => Promise<string>): Promise<void> {
    if (await waitFor(() => check().catch(() => false), ms, POLL_MS)) return;
    throw new Error(`${what}: not within ${ms} ms. Last seen: ${await describe().catch((e: Error) => e.message)}\n${logs()}`);
  }

  // Each sentinel's answer for the master's address: a port, or null.
  const namedMasters = () =>
    Promise.all(
      sentinels.map(async (s) => {
        const r = (await ask(s.port, 'SENTINEL', 'GET-MASTER-ADDR-BY-NAME', name).catch(() => null)) as [string, string] | null;
        return r ? Number(r[1]) : null;
      }),
    );
  const roleOf = async (port: number) => ((await ask(port, 'ROLE').catch(() => null)) as unknown[] | null) ?? null;

  /** Until all sentinels name one master other than `from` and it answers ROLE master. */
  async function newMaster(from: number, what: string, ms: number): Promise<number> {
    let to = 0;
    await expectWithin(
      `${what}: a new master`,
      ms,
      async () => {
        const named = await namedMasters();
        const port = named[0];
        if (!port || port === from || named.some((p) => p !== port)) return false;
        if ((await roleOf(port))?.[0] !== 'master') return false;
        to = port;
        return true;
      },
      async () => `sentinels name ${JSON.stringify(await namedMasters())} (old master ${from})`,
    );
    return to;
  }

  const running = () => [...nodes.values()].filter((p) => !p.killed && !gone(p));
  const replicas = () =>
    running()
      .map((p) => p.port)
      .filter((p) => p !== current);

  async function healthy(): Promise<boolean> {
    for (const port of replicas()) {
      const role = await roleOf(port);
      if (role?.[0] !== 'slave' || Number(role[2]) !== current || role[3] !== 'connected') return false;
    }
    for (const s of sentinels) {
      const known = ((await ask(s.port, 'SENTINEL', 'REPLICAS', name)) as string[][]).map(fields);
      // Only flags: the rest of a sentinel's view comes from INFO, refreshed every
      // 10 s, and is not what its choice of a replica to promote depends on.
      for (const port of replicas()) if (known.find((k) => Number(k.port) === port)?.flags !== 'slave') return false;
    }
    return (await namedMasters()).every((p) => p === current);
  }
  const healthReport = async () => {
    const roles = await Promise.all(replicas().map(async (p) => `${p}: ${JSON.stringify(await roleOf(p))}`));
    const views = await Promise.all(
      sentinels.map(async (s) => {
        const known = ((await ask(s.port, 'SENTINEL', 'REPLICAS', name).catch(() => [])) as string[][]).map(fields);
        return `sentinel ${s.port}: ${known.map((k) => `${k.port} ${k.flags}`).join('; ')}`;
      }),
    );
    return `master ${current}; replicas ${roles.join(', ')}; ${views.join(' | ')}`;
  };

  async function waitHealthy(timeoutMs = HEALTHY_TIMEOUT_MS): Promise<void> {
    await expectWithin('sentinel set healthy', timeoutMs, healthy, healthReport);
  }

  async function waitReplicated(timeoutMs = 5_000): Promise<void> {
    const info = String(await ask(current, 'INFO', 'replication'));
    const target = Number(/master_repl_offset:(\d+)/.exec(info)?.[1]);
    await expectWithin(
      `replicas at offset ${target}`,
      timeoutMs,
      async () => {
        for (const port of replicas()) if (Number((await roleOf(port))?.[4] ?? -1) < target) return false;
        return true;
      },
      async () => (await Promise.all(replicas().map(async (p) => `${p}: ${JSON.stringify(await roleOf(p))}`))).join(', '),
    );
  }

  async function stop(): Promise<void> {
    process.removeListener('exit', killAll);
    await Promise.all([...nodes.values(), ...sentinels].map((p) => killProc(p)));
    for (const c of clients.values()) c.disconnect();
    rmSync(root, { recursive: true, force: true });
  }

  try {
    await startNode(masterPort, null);
    await startNode(replicaPort, masterPort);
    await expectWithin(
      'replica in sync',
      START_TIMEOUT_MS,
      async () => (await roleOf(replicaPort))?.[3] === 'connected',
      async () => JSON.stringify(await roleOf(replicaPort)),
    );
    for (const port of sentinelPorts) await startSentinel(port);
    // A failover needs a quorum that knows the master, its replica and each other.
    await expectWithin(
      'sentinels know each other and the replica',
      DISCOVERY_TIMEOUT_MS,
      async () => {
        for (const s of sentinels) {
          const m = fields((await ask(s.port, 'SENTINEL', 'MASTER', name)) as string[]);
          if (Number(m['num-other-sentinels']) !== sentinels.length - 1 || Number(m['num-slaves']) !== 1) return false;
        }
        return healthy();
      },
      healthReport,
    );
  } catch (err) {
    await stop();
    throw err;
  }

  return {
    name,
    sentinels: sentinelPorts.map((port) => ({ host: HOST, port })),
    sentinelsEnv: sentinelPorts.map((p) => `${HOST}:${p}`).join(','),
    master: () => current,
    async namedMaster() {
      const port = (await namedMasters()).find((p) => p !== null);
      if (!port) throw new Error(`no sentinel of ${name} answered`);
      return port;
    },
    replicas,

    async failover() {
      const from = current;
      const t0 = Date.now();
      // NOGOODSLAVE while a sentinel's view of the replica is not fresh yet; INPROG while one runs.
      let answer = '';
      await expectWithin(
        'SENTINEL FAILOVER accepted',
        PROMOTION_TIMEOUT_MS,
        async () => {
          answer = String(await ask((sentinels[0] as Proc).port, 'SENTINEL', 'FAILOVER', name).catch((e: Error) => e.message));
          return answer === 'OK';
        },
        async () => answer,
      );
      current = await newMaster(from, 'SENTINEL FAILOVER', PROMOTION_TIMEOUT_MS);
      return { from, to: current, ms: Date.now() - t0 };
    },

    async killMaster(options = {}) {
      const from = current;
      const p = nodes.get(from) as Proc;
      const t0 = Date.now();
      p.killed = true;
      await killProc(p);
      await options.onKilled?.();
      current = await newMaster(from, 'SIGKILL of the master', ELECTION_TIMEOUT_MS);
      return { from, to: current, ms: Date.now() - t0 };
    },

    async restartKilled() {
      for (const p of [...nodes.values()].filter((n) => n.killed)) await startNode(p.port, current);
      await waitHealthy();
    },

    waitHealthy,
    waitReplicated,
    pause: (port) => void nodes.get(port)?.child?.kill('SIGSTOP'),
    resume: (port) => void nodes.get(port)?.child?.kill('SIGCONT'),
    node,
    logs,
    stop,
  };
}

const gone = (p: Proc) => !p.child || p.child.exitCode !== null || p.child.signalCode !== null;

async function killProc(p: Proc): Promise<void> {
  const child = p.child;
  if (!child || gone(p)) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGCONT'); // a paused process would not die before it runs again
  child.kill('SIGKILL');
  await exited;
}

/** A sentinel reply's flat [field, value, ...] list as an object. */
function fields(flat: string[]): Record<string, string> {
  const o: Record<string, string> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) o[flat[i] as string] = flat[i + 1] as string;
  return o;
}

function tail(file: string, lines: number): string {
  try {
    return readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

/**
 * `n` distinct free ports in 20000-32767, below Linux's default ephemeral range
 * (32768-60999): a killed node is started again on its port, which an outgoing
 * socket could otherwise have taken meanwhile (as in redis-server.ts).
 */
async function distinctPorts(n: number): Promise<number[]> {
  const ports = new Set<number>();
  for (let i = 0; i < 50 * n && ports.size < n; i++) {
    const port = 20_000 + Math.floor(Math.random() * 12_768);
    if (!ports.has(port) && (await isFree(port))) ports.add(port);
  }
  if (ports.size < n) throw new Error(`no ${n} free ports found in 20000-32767`);
  return [...ports];
}

function isFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once('error', () => resolve(false));
    s.listen(port, HOST, () => s.close(() => resolve(true)));
  });
}
