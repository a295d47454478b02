// Starts a real Redis Cluster from the installed redis-server binary: N masters
// on free loopback ports (each port + 10000 free too, for the cluster bus),
// joined with `redis-cli --cluster create`, in a temporary directory that is
// removed on stop. No replicas: a test moves slots by hand (migrateSlot) to
// make clients follow the redirections.
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { freePort } from '../../src/core/free-port.js';
import { waitFor } from './redis.js';

const run = promisify(execFile);
const BUS_OFFSET = 10_000;

export type ClusterNode = { host: string; port: number };
export type TestCluster = {
  nodes: ClusterNode[];
  /** REDIS_CLUSTER_NODES form: "127.0.0.1:p1,127.0.0.1:p2,..." */
  seeds: string;
  /** A plain connection to one node (CLUSTER commands, CONFIG). */
  node(port: number): Redis;
  stop(): Promise<void>;
};

/** A free port whose cluster bus port (+10000) is free and valid too. */
async function clusterPort(taken: Set<number>): Promise<number> {
  for (let i = 0; i < 200; i++) {
    const p = await freePort();
    if (p + BUS_OFFSET > 65_535 || taken.has(p)) continue;
    if (await isFree(p + BUS_OFFSET)) return p;
  }
  throw new Error('no free port pair for a cluster node');
}

async function isFree(port: number): Promise<boolean> {
  const { createServer } = await import('node:net');
  return new Promise((resolve) => {
    const s = createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

export async function startRedisCluster(masters = 3): Promise<TestCluster> {
  const dir = mkdtempSync(join(tmpdir(), 'ots-cluster-'));
  const procs: ChildProcess[] = [];
  const clients: Redis[] = [];
  const taken = new Set<number>();
  const nodes: ClusterNode[] = [];
  const stop = async () => {
    for (const c of clients) c.disconnect();
    await Promise.all(
      procs.map((p) => {
        if (p.exitCode !== null) return Promise.resolve();
        p.kill('SIGKILL');
        return new Promise((r) => p.once('exit', r));
      }),
    );
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    for (let i = 0; i < masters; i++) {
      const port = await clusterPort(taken);
      taken.add(port);
      procs.push(
        spawn(
          'redis-server',
          [
            '--port',
            String(port),
            '--bind',
            '127.0.0.1',
            '--dir',
            dir,
            '--save',
            '',
            '--appendonly',
            'no',
            '--cluster-enabled',
            'yes',
            '--cluster-config-file',
            `nodes-${port}.conf`,
            '--cluster-node-timeout',
            '3000',
          ],
          { stdio: 'ignore' },
        ),
      );
      nodes.push({ host: '127.0.0.1', port });
    }
    const node = (port: number) => {
      const c = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 1, lazyConnect: false });
      c.on('error', () => {});
      clients.push(c);
      return c;
    };
    const conns = nodes.map((n) => node(n.port));
    const up = await waitFor(async () => (await Promise.all(conns.map((c) => c.ping().catch(() => '')))).every((r) => r === 'PONG'), 10_000, 50);
    if (!up) throw new Error('cluster nodes did not start');
    await run('redis-cli', ['--cluster', 'create', ...nodes.map((n) => `${n.host}:${n.port}`), '--cluster-replicas', '0', '--cluster-yes']);
    // Every node must see the whole slot map before a client may trust any of them.
    const ok = await waitFor(
      async () => {
        const infos = await Promise.all(conns.map((c) => c.cluster('INFO') as Promise<string>));
        return infos.every((i) => i.includes('cluster_state:ok') && i.includes('cluster_slots_assigned:16384') && i.includes(`cluster_known_nodes:${masters}`));
      },
      20_000,
      100,
    );
    if (!ok) throw new Error('cluster did not reach cluster_state:ok');
    return { nodes, seeds: nodes.map((n) => `${n.host}:${n.port}`).join(','), node, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

/**
 * Moves one slot, with its keys, from the master that owns it to another:
 * IMPORTING / MIGRATING, MIGRATE key by key, then SETSLOT NODE on
 * every master. Clients in the middle get ASK (a key already moved), TRYAGAIN
 * (a multi-key command whose keys are split between the two) and then MOVED.
 */
export async function migrateSlot(cluster: TestCluster, slot: number, toPort: number): Promise<{ from: number; keys: number }> {
  const conns = cluster.nodes.map((n) => ({ port: n.port, c: cluster.node(n.port) }));
  const ids = new Map<number, string>();
  for (const { port, c } of conns) ids.set(port, (await c.cluster('MYID')) as string);
  const owner = await ownerOf(conns[0]!.c, slot);
  if (owner === toPort) throw new Error(`slot ${slot} is already on ${toPort}`);
  const src = conns.find((x) => x.port === owner)!.c;
  const dst = conns.find((x) => x.port === toPort)!.c;
  await dst.cluster('SETSLOT', slot, 'IMPORTING', ids.get(owner)!);
  await src.cluster('SETSLOT', slot, 'MIGRATING', ids.get(toPort)!);
  let moved = 0;
  // One key at a time: in between, a script over several keys of the slot finds
  // them split between the two masters (TRYAGAIN), as with a large slot.
  for (;;) {
    const keys = (await src.cluster('GETKEYSINSLOT', slot, 1)) as string[];
    if (keys.length === 0) break;
    await src.migrate('127.0.0.1', toPort, '', 0, 5_000, 'KEYS', ...keys);
    moved += keys.length;
  }
  // Target first, then source, then the rest (as redis-cli does): a source
  // that already points at a target still importing would bounce clients.
  const order = [...conns].sort((a, b) => rank(a.port) - rank(b.port));
  function rank(port: number): number {
    return port === toPort ? 0 : port === owner ? 1 : 2;
  }
  for (const { c } of order) await c.cluster('SETSLOT', slot, 'NODE', ids.get(toPort)!);
  return { from: owner, keys: moved };
}

async function ownerOf(c: Redis, slot: number): Promise<number> {
  const ranges = await c.cluster('SLOTS');
  const r = ranges.find(([lo, hi]) => slot >= lo && slot <= hi);
  const master = r?.[2];
  if (!master) throw new Error(`slot ${slot} has no owner`);
  return master[1];
}
