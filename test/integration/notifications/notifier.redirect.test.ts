// The webhook notifier against real local HTTP servers: a 307 or 308 within
// the endpoint's origin is followed with the same body and headers (a path
// moved, a trailing slash added); one to another origin (another port, another
// host name, another scheme) is refused and that origin never called (the
// signed body carries a contact); any other redirect ends the notification as
// refused (it would turn the POST into a GET, which delivers nothing), and a
// chain of redirects stops.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { errorCategory } from '../../../src/modules/notifications/error-category.js';
import { createWebhookNotifier, type OutgoingNotification } from '../../../src/modules/notifications/notifier.js';
import { NonRetryableError } from '../../../src/queue/index.js';

type Got = { path: string; method: string; body: string; headers: http.IncomingHttpHeaders };
const got: Got[] = [];
/** Calls the other origin got: it must never get one. */
const elsewhere: Got[] = [];
let server: http.Server;
let other: http.Server;
let base: string;
let port: number;
let otherPort: number;

const redirects = (): Record<string, [number, string]> => ({
  '/moved-308': [308, '/hook'],
  '/moved-307': [307, '/hook'],
  '/moved-absolute': [307, `http://127.0.0.1:${port}/hook`],
  '/moved-301': [301, '/hook'],
  '/loop': [307, '/loop'],
  '/nowhere': [308, 'ftp://example.com/hook'],
  '/other-port': [307, `http://127.0.0.1:${otherPort}/latest/api/token`],
  '/other-host': [308, `http://localhost:${port}/hook`],
  '/other-scheme': [308, `https://127.0.0.1:${port}/hook`],
});

function receiver(into: Got[], answer: (path: string) => [number, string] | undefined): http.Server {
  return http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      into.push({ path: req.url ?? '', method: req.method ?? '', body, headers: req.headers });
      const r = answer(req.url ?? '');
      if (r) res.writeHead(r[0], { location: r[1] }).end();
      else res.writeHead(204).end();
    });
  });
}

const listen = async (s: http.Server, host = '127.0.0.1') => {
  await new Promise<void>((resolve) => s.listen(0, host, resolve));
  return (s.address() as AddressInfo).port;
};

beforeAll(async () => {
  server = receiver(got, (path) => redirects()[path]);
  other = receiver(elsewhere, () => undefined);
  port = await listen(server);
  otherPort = await listen(other);
  base = `http://127.0.0.1:${port}`;
});
afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
  await new Promise<void>((resolve) => other.close(() => resolve()));
});

const note = (id: string): OutgoingNotification => ({ id, kind: 'ORDER_CANCELLED', channel: null, recipient: null, payload: { x: 1 }, createdAt: new Date() });
const send = (path: string, id: string) => createWebhookNotifier({ url: `${base}${path}` }, 2_000).send(note(id), new AbortController().signal);
const callsOf = (id: string) => got.filter((g) => g.headers['idempotency-key'] === id);

describe('the webhook notifier and redirects', () => {
  it.each(['/moved-308', '/moved-307', '/moved-absolute'])('follows %s within the origin with the same body and headers', async (path) => {
    const id = `r-${path}`;
    await send(path, id);
    const calls = callsOf(id);
    expect(calls.map((c) => [c.path, c.method])).toEqual([
      [path, 'POST'],
      ['/hook', 'POST'],
    ]);
    expect(calls[1]!.body).toBe(calls[0]!.body);
    expect(JSON.parse(calls[1]!.body)).toMatchObject({ id, payload: { x: 1 } });
    expect(calls[1]!.headers['user-agent']).toBe('order-timeout-service');
  });

  it('ends another redirect as refused, calling nothing more', async () => {
    const err = await send('/moved-301', 'r-301').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NonRetryableError);
    expect(String(err)).toMatch(/redirect not followed: HTTP 301 \(to \/hook\)/);
    expect(callsOf('r-301').map((c) => c.path)).toEqual(['/moved-301']);
  });

  it('stops a chain of redirects, and one to anything but http(s)', async () => {
    await expect(send('/loop', 'r-loop')).rejects.toBeInstanceOf(NonRetryableError);
    expect(callsOf('r-loop')).toHaveLength(4); // the call and three redirects
    await expect(send('/nowhere', 'r-ftp')).rejects.toBeInstanceOf(NonRetryableError);
    expect(callsOf('r-ftp')).toHaveLength(1);
  });

  it.each(['/other-port', '/other-host', '/other-scheme'])('refuses %s to another origin, calling nothing there', async (path) => {
    const id = `r-${path}`;
    const err = await send(path, id).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NonRetryableError);
    expect(String(err)).toMatch(/redirect not followed: HTTP 30[78] \(to [a-z]+:\/\/.*\): .*within the endpoint's origin \(http:\/\/127\.0\.0\.1:\d+\)/);
    expect(errorCategory((err as Error).message)).toBe('redirect refused');
    expect(callsOf(id).map((c) => c.path)).toEqual([path]);
    expect(elsewhere).toEqual([]);
  });

  it('names a receiver that does not listen unreachable', async () => {
    const closed = http.createServer();
    const closedPort = await listen(closed);
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const err = await createWebhookNotifier({ url: `http://127.0.0.1:${closedPort}/hook` }, 2_000)
      .send(note('r-closed'), new AbortController().signal)
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Error);
    expect(err).not.toBeInstanceOf(NonRetryableError); // retried like any failure to connect
    expect(errorCategory((err as Error).message)).toBe('unreachable');
  });
});
