// A loopback TCP proxy for fault injection: tests put it between the service
// and Redis or PostgreSQL and, on demand, reset every open connection, refuse
// new ones for a while, delay the data in both directions, or let the open
// connections go silent (a path that drops packets without a reset: nothing
// gets through and nobody is told). Data order is kept in every mode.
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
  /**
   * Delays every chunk by `ms` from now on, in each direction or only on the
   * way back to the client ('answers': the server acts at once, its answers
   * come late); 0 forwards at once again.
   */
  delay(ms: number, direction?: 'both' | 'answers'): void;
  /**
   * The connections open now go silent for good: what either side sends is
   * dropped, no close or reset is passed on. New connections work. Returns
   * how many went silent.
   */
  silence(): number;
  /** Connections accepted and reset so far. */
  stats(): { accepted: number; dropped: number; open: number };
  close(): Promise<void>;
};

type Pipe = { src: Socket; dst: Socket; toClient: boolean; queue: { at: number; chunk: Buffer }[]; timer: NodeJS.Timeout | null; silent: boolean };

export async function startTcpProxy(target: { host?: string; port: number }): Promise<TcpProxy> {
  const host = target.host ?? '127.0.0.1';
  const open = new Set<Socket>();
  const pipes = new Set<Pipe>();
  let delayMs = 0;
  let answersOnly = false;
  let accepted = 0;
  let dropped = 0;
  let refusing = false;

  // A chunk leaves no earlier than `delayMs` after it came and never before the
  // chunk ahead of it, so shortening the delay cannot reorder the stream.
  function forward(p: Pipe, chunk: Buffer): void {
    if (p.silent) return;
    const ms = answersOnly && !p.toClient ? 0 : delayMs;
    if (ms === 0 && p.queue.length === 0) {
      p.dst.write(chunk);
      return;
    }
    const last = p.queue[p.queue.length - 1];
    p.queue.push({ at: Math.max(Date.now() + ms, last?.at ?? 0), chunk });
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

  function pipe(src: Socket, dst: Socket, toClient: boolean): void {
    const p: Pipe = { src, dst, toClient, queue: [], timer: null, silent: false };
    pipes.add(p);
    src.on('data', (chunk: Buffer) => forward(p, chunk));
    src.on('close', () => {
      pipes.delete(p);
      if (p.timer) clearTimeout(p.timer);
      // Data still held back by a delay is lost with the connection, as on a
      // real network; a silent path passes no close on either.
      if (!p.silent) dst.destroy();
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
    pipe(client, upstream, false);
    pipe(upstream, client, true);
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
    delay(ms, direction = 'both') {
      delayMs = ms;
      answersOnly = direction === 'answers';
    },
    silence() {
      let n = 0;
      for (const p of pipes) {
        if (p.silent) continue;
        p.silent = true;
        p.queue.length = 0;
        n++;
      }
      return n / 2;
    },
    stats: () => ({ accepted, dropped, open: open.size / 2 }),
    async close() {
      for (const s of open) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
