// The OpenAPI document against the running service: a valid OpenAPI 3.1
// document, every route the express app serves described (and nothing else),
// request schemas that refuse what the routes refuse, and answers that match
// the shapes the document gives them.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { redisClient } from '../../helpers/redis.js';
import { orderBody } from '../../helpers/bodies.js';
import { startTestService, stopTestService, type TestService } from '../../helpers/service.js';

const TOKEN = 'openapi-admin-token-0123456789abcd';
/** The Redocly CLI's entry, run with this Node. */
const REDOCLY = join(dirname(createRequire(import.meta.url).resolve('@redocly/cli/package.json')), 'bin', 'cli.js');
type Doc = {
  openapi: string;
  paths: Record<
    string,
    Record<
      string,
      {
        requestBody?: { content: Record<string, { schema: object }> };
        responses: Record<string, { content?: Record<string, { schema: object }> }>;
        security?: unknown[];
      }
    >
  >;
  components: { schemas: Record<string, object> };
};

let tdb: TestDb;
let svc: TestService;
let doc: Doc;
// The Problem component is referenced from every error answer.
const ajv = new Ajv2020({ strict: false, allErrors: true });
(addFormatsModule as unknown as (a: Ajv2020) => void)(ajv);

beforeAll(async () => {
  tdb = await createTestDb('openapi');
  svc = await startTestService(tdb.url, { ADMIN_TOKEN: TOKEN, PARCEL_BATCH_SIZE: '2' });
  const res = await svc.api().get('/openapi.json');
  expect(res.status).toBe(200);
  doc = res.body as Doc;
  ajv.addSchema({ $id: 'doc', ...doc });
});
afterAll(async () => {
  const redis = redisClient('openapi-test');
  redis.disconnect();
  await stopTestService(svc, tdb);
});

/** Validator of the schema at a JSON pointer inside the document (so its $refs resolve). */
function schemaAt(pointer: string[]): ValidateFunction {
  const ref = `doc#/${pointer.map((p) => p.replace(/~/g, '~0').replace(/\//g, '~1')).join('/')}`;
  return ajv.getSchema(ref) ?? ajv.compile({ $ref: ref });
}
const bodySchema = (path: string, method: string) => schemaAt(['paths', path, method, 'requestBody', 'content', 'application/json', 'schema']);

type Layer = { route?: { path: string; methods: Record<string, boolean> }; handle?: { stack?: Layer[] } };
function servedRoutes(stack: readonly Layer[]): string[] {
  return stack.flatMap((l) => {
    if (l.route) return Object.keys(l.route.methods).map((m) => `${m} ${l.route!.path.replace(/:([A-Za-z0-9_]+)/g, '{$1}')}`);
    return l.handle?.stack ? servedRoutes(l.handle.stack) : [];
  });
}

describe('OpenAPI document', () => {
  it('is a valid OpenAPI 3.1 document whose schemas compile as JSON Schema 2020-12', async () => {
    const v = new Validator();
    const r = await v.validate(structuredClone(doc));
    expect(r.errors ?? []).toEqual([]);
    expect(r.valid).toBe(true);
    expect(v.version).toBe('3.1');
    for (const [path, ops] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(ops)) {
        for (const [status, reply] of Object.entries(op.responses)) {
          for (const type of Object.keys(reply.content ?? {}))
            expect(() => schemaAt(['paths', path, method, 'responses', status, 'content', type, 'schema'])).not.toThrow();
        }
      }
    }
  });

  it('describes exactly the routes the app serves, each with its credential: none, the admin token, or an API key and its scope', () => {
    const served = servedRoutes((svc.app as unknown as { router: { stack: Layer[] } }).router.stack).sort();
    const documented = Object.entries(doc.paths)
      .flatMap(([p, ops]) => Object.keys(ops).map((m) => `${m} ${p}`))
      .sort();
    expect(served.length).toBeGreaterThan(25);
    expect(documented).toEqual(served);
    for (const r of ['get /metrics', 'get /readyz', 'post /orders', 'get /admin/queues', 'get /admin/lateness', 'get /admin/dashboard', 'get /docs'])
      expect(documented).toContain(r);
    const open = ['/healthz', '/readyz', '/metrics', '/openapi.json', '/docs', '/admin/dashboard'];
    for (const [p, ops] of Object.entries(doc.paths)) {
      for (const op of Object.values(ops)) {
        if (open.some((o) => p === o || p.startsWith(`${o}/`))) expect(op.security, p).toEqual([]);
        else if (p.startsWith('/admin/')) {
          expect(op.security, p).toEqual([{ adminToken: [] }]);
          expect(op.responses['401'], p).toBeDefined();
        } else {
          expect(op.security, p).toEqual([{ apiKey: [expect.stringMatching(/^[a-z]+:(read|write)$/)] }]);
          for (const status of ['401', '403', '429']) expect(op.responses[status], `${p} ${status}`).toBeDefined();
        }
      }
    }
  });

  it('passes a stock linter: Redocly with its recommended rules, no errors', () => {
    const dir = mkdtempSync(join(tmpdir(), 'ots-openapi-'));
    try {
      const file = join(dir, 'openapi.json');
      writeFileSync(file, JSON.stringify(doc));
      const r = spawnSync(process.execPath, [REDOCLY, 'lint', '--extends=recommended', '--format=json', file], {
        encoding: 'utf8',
        timeout: 120_000,
        env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' },
      });
      const report = JSON.parse(r.stdout) as { totals: { errors: number }; problems: { ruleId: string; severity: string }[] };
      expect(report.problems.filter((p) => p.severity === 'error')).toEqual([]);
      expect(report.totals.errors).toBe(0);
      expect(r.status, r.stderr).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('lists each route’s error codes and the Idempotency-Key header', () => {
    const post = doc.paths['/orders']!.post!;
    const codes = (status: string) => JSON.stringify(post.responses[status]);
    expect(codes('400')).toMatch(/VALIDATION_FAILED/);
    expect(codes('400')).toMatch(/INVALID_IDEMPOTENCY_KEY/);
    expect(codes('422')).toMatch(/IDEMPOTENCY_KEY_REUSED/);
    expect(codes('503')).toMatch(/DATABASE_UNAVAILABLE/);
    expect(JSON.stringify(post)).toContain('#/components/parameters/IdempotencyKey');
    expect(JSON.stringify(doc.paths['/orders/{id}/pay']!.post!.responses['409'])).toMatch(/ORDER_EXPIRED.*ORDER_NOT_PAYABLE|ORDER_NOT_PAYABLE.*ORDER_EXPIRED/);
    expect(JSON.stringify(doc.paths['/admin/queues/{name}/dead']!.get!.responses['404'])).toMatch(/QUEUE_NOT_FOUND/);
  });
});

describe('request schemas refuse what the routes refuse', () => {
  const item = { sku: 'sku-1', quantity: 2, unitPriceCents: 150 };
  const orders: [string, unknown][] = [
    ['a plain order', { customerId: 'c-1', items: [item] }],
    ['with currency and timeout', { customerId: 'c-1', items: [item], currency: 'eur', paymentTimeoutSeconds: 60 }],
    ['no items', { customerId: 'c-1', items: [] }],
    ['101 items', { customerId: 'c-1', items: Array.from({ length: 101 }, () => item) }],
    ['an unknown field', { customerId: 'c-1', items: [item], coupon: 'x' }],
    ['quantity 0', { customerId: 'c-1', items: [{ ...item, quantity: 0 }] }],
    ['a fractional price', { customerId: 'c-1', items: [{ ...item, unitPriceCents: 1.5 }] }],
    ['a 2-letter currency', { customerId: 'c-1', items: [item], currency: 'EU' }],
    ['a control character', { customerId: 'c\u0000-1', items: [item] }],
    ['an empty customer', { customerId: '', items: [item] }],
    ['a string quantity', { customerId: 'c-1', items: [{ ...item, quantity: '2' }] }],
    ['timeout past a week', { customerId: 'c-1', items: [item], paymentTimeoutSeconds: 604_801 }],
    ['not an object', ['c-1']],
  ];

  it('POST /orders', async () => {
    const validate = bodySchema('/orders', 'post');
    for (const [what, body] of orders) {
      const res = await svc
        .api()
        .post('/orders')
        .send(body as object);
      expect([201, 400], what).toContain(res.status);
      expect(validate(body), `${what}: document says ${validate(body)}, route said ${res.status}`).toBe(res.status === 201);
      if (res.status === 400) expect(res.body.code, what).toBe('VALIDATION_FAILED');
    }
  });

  it('PUT /areas/:code and POST /parcels', async () => {
    const area = bodySchema('/areas/{code}', 'put');
    const areas: [string, unknown][] = [
      ['an area', { vehiclePlate: 'AB-123', sorterContact: 'sorter@example.com' }],
      ['a long plate', { vehiclePlate: 'P'.repeat(17), sorterContact: 'sorter@example.com' }],
      ['no contact', { vehiclePlate: 'AB-123' }],
      ['a short contact', { vehiclePlate: 'AB-123', sorterContact: 'ab' }],
    ];
    for (const [what, body] of areas) {
      const res = await svc
        .api()
        .put('/areas/OA-1')
        .send(body as object);
      expect(area(body), what).toBe(res.status === 200);
    }
    const parcel = bodySchema('/parcels', 'post');
    const parcels: [string, unknown][] = [
      ['a parcel', { trackingNo: 'OA-T-1', area: 'OA-1' }],
      ['a bad area code', { trackingNo: 'OA-T-2', area: 'OA 1' }],
      ['spaces around the number', { trackingNo: ' OA-T-3', area: 'OA-1' }],
      ['a 65-character number', { trackingNo: 'T'.repeat(65), area: 'OA-1' }],
    ];
    for (const [what, body] of parcels) {
      const res = await svc
        .api()
        .post('/parcels')
        .send(body as object);
      expect(parcel(body), what).toBe(res.status === 202);
    }
  });
});

describe('answers match their documented shapes', () => {
  const auth = { Authorization: `Bearer ${TOKEN}` };

  async function check(method: 'get' | 'post' | 'put' | 'delete', url: string, docPath: string, body?: object, headers: Record<string, string> = {}) {
    let req = svc.api()[method](url).set(headers);
    if (body) req = req.send(body);
    const res = await req;
    const type = String(res.headers['content-type']).split(';')[0] as string;
    const reply = doc.paths[docPath]?.[method]?.responses[String(res.status)];
    expect(reply, `${method} ${url}: ${res.status} is not documented`).toBeDefined();
    expect(Object.keys(reply!.content ?? {}), `${method} ${url}`).toContain(type);
    const validate = schemaAt(['paths', docPath, method, 'responses', String(res.status), 'content', type, 'schema']);
    expect(validate(res.body), `${method} ${url} ${res.status}: ${JSON.stringify(validate.errors)}`).toBe(true);
    return res;
  }

  it('for the domain routes, successes and problems alike', async () => {
    const order = await check('post', '/orders', '/orders', orderBody({ customerId: 'c-2' }));
    expect(order.status).toBe(201);
    await check('get', `/orders/${order.body.id}`, '/orders/{id}');
    await check('post', `/orders/${order.body.id}/pay`, '/orders/{id}/pay');
    await check('post', `/orders/${order.body.id}/cancel`, '/orders/{id}/cancel'); // 409 ORDER_NOT_CANCELLABLE
    await check('get', '/orders/not-a-uuid', '/orders/{id}');
    await check('post', '/orders', '/orders', { customerId: 'c-2', items: [] });
    const startsAt = new Date(Date.now() + 3_600_000).toISOString();
    const appt = await check('post', '/appointments', '/appointments', { customerId: 'c', contact: 'c@example.com', channel: 'email', startsAt });
    await check('get', `/appointments/${appt.body.id}`, '/appointments/{id}');
    await check('post', `/appointments/${appt.body.id}/cancel`, '/appointments/{id}/cancel');
    await check('put', '/areas/OA-2', '/areas/{code}', { vehiclePlate: 'CD-1', sorterContact: 'x@example.com' });
    await check('get', '/areas/OA-2', '/areas/{code}');
    await check('post', '/parcels', '/parcels', { trackingNo: 'OA2-1', area: 'OA-2' });
    const full = await check('post', '/parcels', '/parcels', { trackingNo: 'OA2-2', area: 'OA-2' });
    expect(full.body.status).toBe('BATCHED');
    await check('get', `/batches/${full.body.batchId}`, '/batches/{id}');
    await check('get', '/batches?area=OA-2', '/batches');
    await check('get', `/notifications?batchId=${full.body.batchId}`, '/notifications');
    await check('get', '/notifications?orderId=1', '/notifications');
    await check('get', '/healthz', '/healthz');
    await check('get', '/readyz', '/readyz');
  });

  it('for the admin routes', async () => {
    await check('get', '/admin/queues', '/admin/queues', undefined, auth);
    await check('get', '/admin/queues', '/admin/queues'); // 401
    await check('get', '/admin/queues/orders/dead?limit=5', '/admin/queues/{name}/dead', undefined, auth);
    await check('get', '/admin/queues/nope/dead', '/admin/queues/{name}/dead', undefined, auth);
    await check('get', `/admin/queues/orders/jobs/${encodeURIComponent('orders:reconcile')}`, '/admin/queues/{name}/jobs/{id}', undefined, auth);
    await check('get', '/admin/lateness?minutes=2', '/admin/lateness', undefined, auth);
    await check('get', '/admin/batches', '/admin/batches', undefined, auth);
    await check('post', '/admin/queues/orders/dead/redrive', '/admin/queues/{name}/dead/redrive', undefined, auth);
  });

  it('serves a browsable page and its files, without any outside address', async () => {
    const page = await svc.api().get('/docs');
    expect(page.status).toBe(200);
    expect(page.headers['content-type']).toMatch(/text\/html/);
    const srcs = [...page.text.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1] as string);
    expect(srcs.length).toBeGreaterThanOrEqual(2);
    for (const src of srcs) {
      expect(src).toMatch(/^\/docs\//);
      expect((await svc.api().get(src)).status, src).toBe(200);
    }
    expect((await svc.api().get('/docs/index.html')).body.code).toBe('NOT_FOUND');
  });
});
