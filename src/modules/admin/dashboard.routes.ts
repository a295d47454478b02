// The operators' dashboard page (static HTML, JS, CSS from ./dashboard/, no
// build step). Served without the token: the page holds no data; it asks the
// operator for the token and calls the token-protected /admin API with it.
import { readFileSync } from 'node:fs';
import { type RouteTable, fileParam, route } from '../../core/http/route.js';

const DIR = new URL('./dashboard/', import.meta.url);
const ASSETS = { 'dashboard.js': 'text/javascript', 'chart.js': 'text/javascript', 'dashboard.css': 'text/css' } as const;
type Asset = keyof typeof ASSETS;
const NAMES = Object.keys(ASSETS) as [Asset, ...Asset[]];
const CSP = "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

export function dashboardRoutes(): RouteTable {
  // Read once at start: a missing file fails the start, not an operator's page load.
  const page = readFileSync(new URL('index.html', DIR), 'utf8');
  const files = new Map(NAMES.map((a) => [a, readFileSync(new URL(a, DIR), 'utf8')]));
  return {
    tag: 'dashboard',
    description: 'The operators’ dashboard (served only when ADMIN_TOKEN is set).',
    routes: [
      route({
        method: 'get',
        path: '/admin/dashboard',
        auth: 'public',
        summary: 'The operators’ dashboard: queues, lateness, dead letters, parcel batches',
        responses: { 200: { description: 'an HTML page', contentType: 'text/html' } },
        handle: (_input, res) => {
          // The tab holds the admin token: no script but ours, and no framing (the buttons redrive and delete).
          res.type('html').set({ 'Cache-Control': 'no-cache', 'Content-Security-Policy': CSP, 'Referrer-Policy': 'no-referrer' }).send(page);
        },
      }),
      route({
        method: 'get',
        path: '/admin/dashboard/:asset',
        auth: 'public',
        summary: 'Script and style of the dashboard',
        params: { asset: fileParam(NAMES) },
        responses: { 200: { description: 'the file (JavaScript or CSS)', contentType: 'text/*' } },
        handle: ({ params }, res) => {
          res.type(ASSETS[params.asset]).set('Cache-Control', 'no-cache').send(files.get(params.asset));
        },
      }),
    ],
  };
}
