// The webhook notifier against a real local HTTP server: a 307 or 308 is
// followed with the same body and headers (as fetch did: an endpoint moved to
// https or given a trailing slash), any other redirect ends the notification
// as refused (it would turn the POST into a GET, which delivers nothing), and
// a chain of redirects stops. Review of 8d4cf4d: the first node:http notifier
// followed none, so an endpoint behind a 308 was never delivered to.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWebhookNotifier, type OutgoingNotification } from '../../src/modules/notifications/notifier.js';
import { NonRetryableError } from '../../src/queue/index.js';

type Got = { path: string; method: string; body: string; headers: http.IncomingHttpHeaders };
const got: Got[] = [];
let server: http.Server;
let base: string;

const REDIRECTS: Record<string, [number, string]> = {
  '/moved-308': [308, '/hook'],
  '/moved-307': [307, '/hook'],
  '/moved-301': [301, '/hook'],
  '/loop': [307, '/loop'],
  '/nowhere': [308, 'ftp://example.com/hook'],
};

beforeAll(async () => {
  server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      got.push({ path: req.url ?? '', method: req.method ?? '', body, headers: req.headers });
      const r = REDIRECTS[req.url ?? ''];
      if (r) res.writeHead(r[0], { location: r[1] }).end();
      else res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

const note = (id: string): OutgoingNotification => ({ id, kind: 'ORDER_CANCELLED', channel: null, recipient: null, payload: { x: 1 }, createdAt: new Date() });
const send = (path: string, id: string) => createWebhookNotifier({ url: `${base}${path}` }, 2_000).send(note(id), new AbortController().signal);
const callsOf = (id: string) => got.filter((g) => g.headers['idempotency-key'] === id);

describe('the webhook notifier and redirects', () => {
  it.each(['/moved-308', '/moved-307'])('follows %s with the same body and headers', async (path) => {
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
    expect(String(err)).toMatch(/HTTP 301 \(to \/hook\)/);
    expect(callsOf('r-301').map((c) => c.path)).toEqual(['/moved-301']);
  });

  it('stops a chain of redirects, and one to anything but http(s)', async () => {
    await expect(send('/loop', 'r-loop')).rejects.toBeInstanceOf(NonRetryableError);
    expect(callsOf('r-loop')).toHaveLength(4); // the call and three redirects
    await expect(send('/nowhere', 'r-ftp')).rejects.toBeInstanceOf(NonRetryableError);
    expect(callsOf('r-ftp')).toHaveLength(1);
  });
});
