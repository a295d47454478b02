// A stand-in for the third party a notification goes to: a real local HTTP
// server whose behaviour the test sets (answer ok, fail, refuse, hang, or
// answer only after a while, or answer at once with a body that comes slowly).
// It logs every request it gets, and separately every one it answered with a
// success that reached the caller: a slow answer the caller gave up on (its
// connection closed first) is not delivered.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';

export type Received = {
  at: number;
  idempotencyKey: string | undefined;
  body: { id: string; kind: string };
  /** The body as sent, and the headers: what a signature covers. */
  raw: string;
  headers: Record<string, string>;
  /** How the receiver chose to answer it. */
  answer?: 'ok' | 'fail' | 'hang' | 'reject';
  /** When a success's status line went out (for a delivered call). */
  answeredAt?: number;
};
/**
 * 'ok' 204, 'fail' 503, 'reject' 400, 'hang' never answers, { slowMs, then }
 * answers after slowMs, { slowBodyMs } answers 200 at once (delivered) and
 * ends its body only after slowBodyMs.
 */
export type Answer = 'ok' | 'fail' | 'hang' | 'reject' | { readonly slowMs: number; readonly then: 'ok' | 'fail' | 'reject' } | { readonly slowBodyMs: number };
export type Behaviour = (call: number, body: Received['body']) => Answer;

export type Webhook = {
  url: string;
  /** Every request received, answered or not. */
  calls: Received[];
  /** Requests answered with a success (2xx) while the caller still waited: what the outside world took. */
  delivered: Received[];
  setBehaviour(b: Behaviour): void;
  close(): Promise<void>;
};

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve) => {
    let data = '';
    req.on('data', (c) => (data += c));
    req.on('end', () => resolve(data));
  });
}

const STATUS = { ok: 204, fail: 503, reject: 400 } as const;

export async function startWebhook(initial: Behaviour = () => 'ok'): Promise<Webhook> {
  let behaviour = initial;
  const calls: Received[] = [];
  const delivered: Received[] = [];
  const server: Server = createServer((req, res) => void answer(req, res));
  async function answer(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const raw = await readBody(req);
    const body = JSON.parse(raw) as Received['body'];
    const headers = Object.fromEntries(Object.entries(req.headers).flatMap(([k, v]) => (typeof v === 'string' ? [[k, v]] : [])));
    const got: Received = { at: Date.now(), idempotencyKey: req.headers['idempotency-key'] as string | undefined, body, raw, headers };
    calls.push(got);
    const b = behaviour(calls.length, body);
    if (typeof b === 'object' && 'slowBodyMs' in b) {
      got.answer = 'ok';
      res.writeHead(200, { 'content-type': 'text/plain' });
      // The status line is the answer: once it is out, the receiver has taken it.
      res.write('accepted', (err) => {
        if (err) return;
        got.answeredAt = Date.now();
        delivered.push(got);
      });
      setTimeout(() => {
        if (!res.destroyed) res.end();
      }, b.slowBodyMs);
      return;
    }
    got.answer = typeof b === 'string' ? b : b.then;
    if (b === 'hang') return; // never answers; the caller's timeout must end it
    const outcome = typeof b === 'string' ? b : b.then;
    if (typeof b !== 'string') {
      await new Promise((r) => setTimeout(r, b.slowMs));
      // The caller gave up and closed the connection: nothing was delivered.
      if (req.socket.destroyed || res.destroyed) return;
    }
    res.statusCode = STATUS[outcome];
    if (outcome === 'ok')
      res.once('finish', () => {
        got.answeredAt = Date.now();
        delivered.push(got);
      });
    res.end();
  }
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const addr = server.address();
  const port = typeof addr === 'object' && addr ? addr.port : 0;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    calls,
    delivered,
    setBehaviour: (b) => (behaviour = b),
    close: () =>
      new Promise((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
