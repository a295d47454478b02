// A loopback TCP proxy for fault injection: tests put it between the service
// and Redis or PostgreSQL and, on demand, reset every open connection, refuse
// new ones for a while or delay the data in both directions. Data order is
// kept in every mode.
import { type AddressInfo, type Socket, connect, createServer } from 'node:net';
import { sleep } from './redis.js';

export type TcpProxy = {
  readonly port: number;
  /** Resets (RST) every open connection on both sides; returns how many were open. */
  dropAll(): number;
  /**
   * Refuses new connections for `ms`: each is reset (RST) as soon as it is
   * accepted. (Closing the port instead would free it for any socket on the
   * machine to take meanwhile.) Open connections stay.
   */
  refuse(ms: number): Promise<void>;
  /** Delays every chunk by `ms` in each direction from now on; 0 forwards at once again. */
  delay(ms: number): void;
  /** Connections accepted and reset so far. */
  stats(): { accepted: number; dropped: number; open: number };
  close(): Promise<void>;
};

type Pipe = { src: Socket; dst: Socket; queue: { at: number; chunk: Buffer }[]; timer: NodeJS.Timeout | null };

export async function startTcpProxy(target: { host?: string; port: number }): Promise<TcpProxy> {
  const host = target.host ?? '127.0.0.1';
  const open = new Set<Socket>();
  let delayMs = 0;
  let accepted = 0;
  let dropped = 0;
  let refusing = false;

  // A chunk leaves no earlier than `delayMs` after it came and never before the
  // chunk ahead of it, so shortening the delay cannot reorder the stream.
  function forward(p: Pipe, chunk: Buffer): void {
    if (delayMs === 0 && p.queue.length === 0) {
      p.dst.write(chunk);
      return;
    }
    const last = p.queue[p.queue.length - 1];
    p.queue.push({ at: Math.max(Date.now() + delayMs, last?.at ?? 0), chunk });
    if (!p.timer) drain(p);
  }

  function drain(p: Pipe): void {
    p.timer = null;
    while (p.queue.length > 0 && (p.queue[0] as { at: number }).at <= Date.now()) {
      const { chunk } = p.queue.shift() as { chunk: Buffer };
      if (!p.dst.destroyed) p.dst.write(chunk);
    }
    const next = p.queue[0];
    if (next) p.timer = setTimeout(() => drain(p), Math.max(0, next.at - Date.now()));
  }

  function pipe(src: Socket, dst: Socket): void {
    const p: Pipe = { src, dst, queue: [], timer: null };
    src.on('data', (chunk: Buffer) => forward(p, chunk));
    src.on('close', () => {
      if (p.timer) clearTimeout(p.timer);
      // Data still held back by a delay is lost with the connection, as on a real network.
      dst.destroy();
    });
  }

  function onConnection(client: Socket): void {
    if (refusing) {
      client.on('error', () => {});
      client.resetAndDestroy();
      return;
    }
    accepted++;
    const upstream = connect({ host, port: target.port });
    for (const s of [client, upstream]) {
      open.add(s);
      s.setNoDelay(true);
      s.on('error', () => s.destroy());
      s.on('close', () => open.delete(s));
    }
    pipe(client, upstream);
    pipe(upstream, client);
  }

  const server = createServer(onConnection);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;

  return {
    port,
    dropAll() {
      const n = open.size / 2;
      for (const s of open) s.resetAndDestroy();
      dropped += n;
      return n;
    },
    async refuse(ms) {
      refusing = true;
      await sleep(ms);
      refusing = false;
    },
    delay(ms) {
      delayMs = ms;
    },
    stats: () => ({ accepted, dropped, open: open.size / 2 }),
    async close() {
      for (const s of open) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
