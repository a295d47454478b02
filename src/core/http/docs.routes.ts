// The API's description: GET /openapi.json (generated from the route tables)
// and GET /docs, Swagger UI served from the swagger-ui-dist package (no CDN:
// the service must document itself on a closed network).
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { OpenApiDocument } from './openapi.js';
import { type RouteTable, fileParam, route } from './route.js';

const SWAGGER_DIR = dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));
const ASSETS = ['swagger-ui.css', 'swagger-ui-bundle.js', 'favicon-32x32.png'] as const;

// validatorUrl null: Swagger UI would otherwise send the document to an outside validator.
const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Order timeout service API</title>
<link rel="stylesheet" href="/docs/swagger-ui.css">
<link rel="icon" type="image/png" href="/docs/favicon-32x32.png">
</head>
<body>
<div id="swagger-ui"></div>
<script src="/docs/swagger-ui-bundle.js"></script>
<script src="/docs/swagger-init.js"></script>
</body>
</html>
`;

// A file of its own, not an inline script: the page's Content-Security-Policy runs only scripts of this origin.
const INIT = `window.ui = SwaggerUIBundle({ url: '/openapi.json', dom_id: '#swagger-ui', validatorUrl: null, deepLinking: true });\n`;

/** `document` is read when first asked for: it describes these routes too, so it is built after them. */
export function docsRoutes(document: () => OpenApiDocument): RouteTable {
  // Serialised once (~115 kB): the document never changes while the process runs, and anyone may ask for it.
  let text: string | undefined;
  return {
    tag: 'documentation',
    description: 'This document and a page to browse it.',
    routes: [
      route({
        method: 'get',
        path: '/openapi.json',
        auth: 'public',
        summary: 'This OpenAPI 3.1 document',
        responses: { 200: { description: 'the document' } },
        handle: (_input, res) => {
          text ??= JSON.stringify(document());
          res.type('application/json').send(text);
        },
      }),
      route({
        method: 'get',
        path: '/docs',
        auth: 'public',
        summary: 'Browse this document (Swagger UI)',
        responses: { 200: { description: 'an HTML page', contentType: 'text/html' } },
        handle: (_input, res) => {
          res.type('html').send(PAGE);
        },
      }),
      route({
        method: 'get',
        path: '/docs/swagger-init.js',
        auth: 'public',
        summary: "The documentation page's start-up script",
        responses: { 200: { description: 'JavaScript', contentType: 'text/javascript' } },
        handle: (_input, res) => {
          res.type('text/javascript').set('Cache-Control', 'no-cache').send(INIT);
        },
      }),
      route({
        method: 'get',
        path: '/docs/:asset',
        auth: 'public',
        summary: 'Static files of the documentation page',
        params: { asset: fileParam(ASSETS) },
        responses: { 200: { description: 'the file (CSS, JavaScript or an icon)', contentType: '*/*' } },
        handle: (input, res) => {
          res.sendFile(join(SWAGGER_DIR, input.params.asset), { maxAge: '1h' });
        },
      }),
    ],
  };
}
