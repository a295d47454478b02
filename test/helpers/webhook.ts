// A stand-in for the third party a notification goes to: a real local HTTP
// server whose behaviour the test sets (fail N times, always fail, hang).
import { createServer, type IncomingMessage, type Server } from 'node:http';

export type Received = { at: number; idempotencyKey: string | undefined; body: { id: string; kind: string } };
export type Behaviour = (call: number) => 'ok' | 'fail' | 'hang' | 'reject';

export type Webhook = {
  url: string;
  calls: Received[];
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

export async function startWebhook(initial: Behaviour = () => 'ok'): Promise<Webhook> {
  let behaviour = initial;
  const calls: Received[] = [];
  const server: Server = createServer(async (req, res) => {
    const body = JSON.parse(await readBody(req)) as Received['body'];
    calls.push({ at: Date.now(), idempotencyKey: req.headers['idempotency-key'] as string | undefined, body });
    const b = behaviour(calls.length);
    if (b === 'hang') return; // never answers; the caller's timeout must end it
    res.statusCode = b === 'ok' ? 204 : b === 'reject' ? 400 : 503;
    res.end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const addr = server.address();
  const port = typeof addr === 'object' && addr ? addr.port : 0;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    calls,
    setBehaviour: (b) => (behaviour = b),
    close: () =>
      new Promise((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
