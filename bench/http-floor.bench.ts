// What the HTTP stack alone costs a request, under the load bench:parcels puts
// on POST /parcels (autocannon, 50 connections, a small JSON body in, a small
// JSON answer out, 202), with no service behind it: a server process per
// stack, its CPU per request from /proc. The stacks:
//   bare     node:http, the body read and parsed by hand
//   express  express 5, one route, express.json()
//   nojson   express 5, one route, the body read by hand
//   helmet   express + helmet() in front, as src/app.ts has
//   routers  helmet + 8 routers of 5 routes mounted before the answering one
//            (the service has 39 routes in its route tables)
// The service's own CPU per request (bench:parcels) less this floor is what
// its own work costs. Prints JSON; records nothing (bench/HISTORY.md quotes it).
//
// Run: `npm run bench:floor`. Knobs: BENCH_FLOOR_STACKS (comma-separated, in
// order; default every stack, twice, alternating), BENCH_DURATION_S=10.
import { type ChildProcess, fork } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import express from 'express';
import helmet from 'helmet';
import { processCpuSeconds } from './bench-util.js';
import { autocannon, machineInfo, makeLog, num } from './http-harness.js';

const STACKS = ['bare', 'express', 'nojson', 'helmet', 'routers'] as const;
type Stack = (typeof STACKS)[number];
const log = makeLog('bench:floor');

function answer(p: { trackingNo: string; area: string }) {
  return { trackingNo: p.trackingNo, area: p.area, status: 'WAITING', batchId: null, createdAt: new Date().toISOString() };
}

function readBody(req: http.IncomingMessage, done: (body: string) => void): void {
  let b = '';
  req.setEncoding('utf8');
  req.on('data', (c: string) => (b += c));
  req.on('end', () => done(b));
}

function serve(stack: Stack): http.Server {
  if (stack === 'bare') {
    return http.createServer((req, res) => {
      readBody(req, (b) => {
        const out = JSON.stringify(answer(JSON.parse(b)));
        res.writeHead(202, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(out) });
        res.end(out);
      });
    });
  }
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  if (stack === 'helmet' || stack === 'routers') app.use(helmet());
  if (stack === 'routers') {
    for (let t = 0; t < 8; t++) {
      const r = express.Router();
      for (let i = 0; i < 5; i++) r.get(`/t${t}/r${i}/:id`, (_req, res) => void res.end());
      app.use(r);
    }
  }
  if (stack === 'nojson') app.post('/parcels', (req, res) => readBody(req, (b) => void res.status(202).json(answer(JSON.parse(b)))));
  else app.post('/parcels', express.json(), (req, res) => void res.status(202).json(answer(req.body)));
  return http.createServer(app);
}

async function measure(stack: Stack, durationS: number) {
  const child: ChildProcess = fork(fileURLToPath(import.meta.url), ['serve', stack], { execArgv: ['--import', 'tsx'] });
  try {
    const { port } = await new Promise<{ port: number }>((resolve) => child.once('message', (m) => resolve(m as { port: number })));
    let next = 0;
    const opts = {
      url: `http://127.0.0.1:${port}`,
      connections: 50,
      requests: [
        {
          method: 'POST',
          path: '/parcels',
          headers: { 'content-type': 'application/json' },
          setupRequest: (req: object) => ({ ...req, body: JSON.stringify({ trackingNo: `t-${next++}`, area: `a${next % 50}` }) }),
        },
      ],
    };
    await autocannon({ ...opts, duration: 2 }); // warm-up: JIT, connections
    const pid = child.pid as number;
    const cpu = () => processCpuSeconds(pid) ?? Number.NaN;
    const c0 = cpu();
    const r = await autocannon({ ...opts, duration: durationS });
    const n = r.requests.total;
    const figures = {
      stack,
      requestsPerSec: Math.round(n / durationS),
      serverCpuUsPerRequest: Math.round(((cpu() - c0) * 1e6) / n),
      p99Ms: r.latency.p99,
      non2xx: r.non2xx,
    };
    log(JSON.stringify(figures));
    return figures;
  } finally {
    child.kill();
  }
}

async function main(): Promise<void> {
  if (process.argv[2] === 'serve') {
    const server = serve(process.argv[3] as Stack);
    server.listen(0, '127.0.0.1', () => process.send?.({ port: (server.address() as AddressInfo).port }));
    return;
  }
  const given = process.env.BENCH_FLOOR_STACKS?.split(',').filter(Boolean);
  const unknown = given?.filter((s) => !(STACKS as readonly string[]).includes(s));
  if (unknown?.length) throw new Error(`BENCH_FLOOR_STACKS: unknown ${unknown.join(', ')} (known: ${STACKS.join(', ')})`);
  const order = (given as Stack[] | undefined) ?? [...STACKS, ...STACKS];
  const durationS = num('BENCH_DURATION_S', 10);
  const runs = [];
  for (const stack of order) runs.push(await measure(stack, durationS));
  const machine = machineInfo({ postgres: 'PostgreSQL not used', redis: 'Redis not used' });
  process.stdout.write(`${JSON.stringify({ benchmark: 'http-floor', date: new Date().toISOString(), machine, durationS, runs }, null, 2)}\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`bench:floor failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
