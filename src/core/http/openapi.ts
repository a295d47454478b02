// The OpenAPI 3.1 document, generated from the route tables the app serves:
// parameters and bodies from the very zod schemas the routes check input with
// (z.toJSONSchema, draft 2020-12: the dialect of OpenAPI 3.1), the answers each
// route declares, and per error status a problem+json answer listing its codes.
import { z } from 'zod';
import { idempotencyKeySchema } from './idempotency-key.js';
import { type ErrorCase, HTTP_ERRORS, type Reply, type RouteDoc, type RouteTable } from './route.js';

export type JsonSchema = { [key: string]: unknown };
type Parameter = { name: string; in: 'path' | 'query' | 'header'; required: boolean; schema: JsonSchema; description?: string };
type Operation = { [key: string]: unknown; responses: Record<string, unknown> };
export type OpenApiDocument = {
  openapi: '3.1.0';
  info: { title: string; version: string; description?: string };
  servers: { url: string; description: string }[];
  tags: { name: string; description?: string }[];
  paths: Record<string, Partial<Record<RouteDoc['method'], Operation>>>;
  components: Record<string, Record<string, unknown>>;
};
export type OpenApiInfo = OpenApiDocument['info'];

const PROBLEM = '#/components/schemas/Problem';
const ADMIN = 'adminToken';
const API_KEY = 'apiKey';

/** A request-side schema describes what a client sends (before transforms and defaults); an answer's, what it gets. */
export function jsonSchemaOf(schema: z.ZodType, io: 'input' | 'output'): JsonSchema {
  // Unrepresentable schemas throw here, when the app is built, not when someone opens /docs.
  const { $schema: _dialect, ...rest } = z.toJSONSchema(schema, { target: 'draft-2020-12', io }) as JsonSchema;
  return rest;
}

export function openApiDocument(info: OpenApiInfo, tables: readonly RouteTable[]): OpenApiDocument {
  const paths: OpenApiDocument['paths'] = {};
  for (const table of tables) {
    for (const { doc } of table.routes) {
      const path = doc.path.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
      paths[path] = { ...paths[path], [doc.method]: operation(doc, table) };
    }
  }
  return {
    openapi: '3.1.0',
    info,
    servers: [{ url: '/', description: 'this service (the document is served by the API it describes)' }],
    tags: tables.map((t) => ({ name: t.tag, ...(t.description && { description: t.description }) })),
    paths,
    components: {
      schemas: { Problem: problemSchema() },
      parameters: {
        IdempotencyKey: {
          name: 'Idempotency-Key',
          in: 'header',
          required: false,
          description:
            'Makes a create safe to retry: the same key and body answer the same resource; the same key with another body is 422 IDEMPOTENCY_KEY_REUSED.',
          schema: jsonSchemaOf(idempotencyKeySchema, 'input'),
        },
      },
      securitySchemes: {
        [API_KEY]: {
          type: 'http',
          scheme: 'bearer',
          description:
            'An API key (`ots_…`), made by an operator (POST /admin/api-keys or `npm run keys -- create`). ' +
            'Each operation lists the one scope it needs: without a valid key 401 UNAUTHORIZED, without the scope 403 INSUFFICIENT_SCOPE.',
        },
        [ADMIN]: { type: 'http', scheme: 'bearer', description: 'The ADMIN_TOKEN of the service: opens /admin only, never the domain API' },
      },
    },
  };
}

function operation(doc: RouteDoc, table: RouteTable): Operation {
  const parameters: unknown[] = [...pathParameters(doc), ...(doc.query ? queryParameters(doc.query) : [])];
  if (doc.idempotencyKey) parameters.push({ $ref: '#/components/parameters/IdempotencyKey' });
  const op: Operation = {
    tags: [table.tag],
    summary: doc.summary,
    ...(doc.description && { description: doc.description }),
    operationId: operationId(doc),
    ...(parameters.length > 0 && { parameters }),
    ...(doc.body && {
      requestBody: { required: !doc.bodyOptional, content: { 'application/json': { schema: jsonSchemaOf(doc.body, 'input') } } },
    }),
    responses: { ...replies(doc.responses), ...problems(errorCasesOf(doc, table)) },
    security: securityOf(doc),
  };
  return op;
}

/** An empty list says "no credential" (public); OpenAPI 3.1 lets a bearer scheme list the scope it needs. */
function securityOf(doc: RouteDoc): Record<string, string[]>[] {
  if (doc.auth === 'public') return [];
  if (doc.auth === 'admin') return [{ [ADMIN]: [] }];
  return [{ [API_KEY]: [doc.auth] }];
}

function pathParameters(doc: RouteDoc): Parameter[] {
  return Object.entries(doc.params ?? {}).map(([name, p]) => ({
    name,
    in: 'path',
    required: true,
    schema: jsonSchemaOf(p.schema, 'input'),
    description: `else ${p.status} ${p.code}`,
  }));
}

/** Query parameters from an object schema, or a union of them (each branch's fields, none required alone). */
function queryParameters(schema: z.ZodType): Parameter[] {
  const json = jsonSchemaOf(schema, 'input');
  const branches = (json.anyOf ?? json.oneOf) as JsonSchema[] | undefined;
  const objects = branches ?? [json];
  const out = new Map<string, Parameter>();
  for (const o of objects) {
    const required = new Set((o.required as string[] | undefined) ?? []);
    for (const [name, s] of Object.entries((o.properties as Record<string, JsonSchema> | undefined) ?? {})) {
      out.set(name, { name, in: 'query', required: !branches && required.has(name), schema: s });
    }
  }
  return [...out.values()];
}

function replies(responses: Readonly<Record<number, Reply>>): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(responses).map(([status, r]) => {
      const type = r.contentType ?? 'application/json';
      const schema = r.schema ? jsonSchemaOf(r.schema, 'output') : type.startsWith('application/json') ? {} : { type: 'string' };
      const headers = r.headers && Object.fromEntries(Object.entries(r.headers).map(([h, d]) => [h, { description: d, schema: { type: 'string' } }]));
      return [status, { description: r.description, ...(headers && { headers }), content: { [type]: { schema } } }];
    }),
  );
}

/** Every error a route can answer with: the ones its input checks imply, its own, its table's. */
export function errorCasesOf(doc: RouteDoc, table: RouteTable): ErrorCase[] {
  const cases: ErrorCase[] = [];
  const { UNAUTHORIZED, INSUFFICIENT_SCOPE, RATE_LIMITED, TOO_MANY_AUTH_FAILURES } = HTTP_ERRORS;
  if (doc.auth === 'public') cases.push(RATE_LIMITED);
  else if (doc.auth === 'admin') cases.push(UNAUTHORIZED, TOO_MANY_AUTH_FAILURES);
  else cases.push(UNAUTHORIZED, INSUFFICIENT_SCOPE, RATE_LIMITED, TOO_MANY_AUTH_FAILURES);
  if (doc.query) cases.push(doc.queryError ?? HTTP_ERRORS.VALIDATION_FAILED);
  for (const p of Object.values(doc.params ?? {})) cases.push(p);
  if (doc.idempotencyKey) cases.push(HTTP_ERRORS.INVALID_IDEMPOTENCY_KEY);
  if (doc.body) {
    const { VALIDATION_FAILED, INVALID_JSON, PAYLOAD_TOO_LARGE, UNSUPPORTED_MEDIA_TYPE, UNSUPPORTED_ENCODING } = HTTP_ERRORS;
    cases.push(VALIDATION_FAILED, INVALID_JSON, PAYLOAD_TOO_LARGE, UNSUPPORTED_MEDIA_TYPE, UNSUPPORTED_ENCODING);
  }
  cases.push(...(doc.errors ?? []), ...(table.errors ?? []), HTTP_ERRORS.INTERNAL);
  const seen = new Set<string>();
  return cases.filter((c) => !seen.has(`${c.status} ${c.code}`) && Boolean(seen.add(`${c.status} ${c.code}`)));
}

function problems(cases: readonly ErrorCase[]): Record<string, unknown> {
  const byStatus = new Map<number, string[]>();
  for (const c of cases) byStatus.set(c.status, [...(byStatus.get(c.status) ?? []), c.code]);
  return Object.fromEntries(
    [...byStatus].map(([status, codes]) => [
      String(status),
      {
        description: codes.join(', '),
        content: { 'application/problem+json': { schema: { allOf: [{ $ref: PROBLEM }, { properties: { code: { enum: codes } } }] } } },
      },
    ]),
  );
}

function problemSchema(): JsonSchema {
  return {
    type: 'object',
    description: 'RFC 9457 problem details; `code` is stable, `title` and `detail` are for people.',
    required: ['type', 'title', 'status', 'code'],
    properties: {
      type: { type: 'string', description: 'about:blank#<code>' },
      title: { type: 'string' },
      status: { type: 'integer' },
      code: { type: 'string' },
      detail: { type: 'string' },
      errors: {
        type: 'array',
        description: 'VALIDATION_FAILED: the failing fields',
        items: { type: 'object', properties: { path: { type: 'string' }, message: { type: 'string' } } },
      },
    },
  };
}

function operationId(doc: RouteDoc): string {
  const words = doc.path.split(/[^A-Za-z0-9]+/).filter(Boolean);
  return doc.method + words.map((w) => w[0]?.toUpperCase() + w.slice(1)).join('');
}
