// One HTTP route declared once: method, path, the zod schemas its input is
// checked with, its answers and error codes, and the handler. The express
// router and the OpenAPI document are both built from these declarations, so
// what the API checks and what it documents cannot drift apart.
import express, { Router, type Request, type RequestHandler, type Response } from 'express';
import { z } from 'zod';
import type { Caller } from '../auth/api-keys.js';
import { type ApiKeyGuard, callerOf } from '../auth/guard.js';
import type { Scope } from '../auth/scopes.js';
import { AppError } from '../errors.js';
import type { RateLimit } from '../rate-limit.js';
import { bearerAuth } from './bearer-auth.js';
import { idempotencyKey } from './idempotency-key.js';

/**
 * Who may call a route: anyone ('public': health, metrics, the documents and
 * pages without data), operators with the admin token ('admin': only in a
 * table with a bearer guard), or a client whose API key holds the scope.
 */
export type RouteAuth = 'public' | 'admin' | Scope;

/** Largest JSON body accepted. */
export const BODY_LIMIT = '64kb';

export type HttpMethod = 'get' | 'post' | 'put' | 'patch' | 'delete';

/** A problem+json answer a route may give: its status and stable code. */
export type ErrorCase = { readonly status: number; readonly code: string };

/** A path parameter: checked by its schema; a mismatch is answered with this route's own code. */
export type PathParam<S extends z.ZodType = z.ZodType> = ErrorCase & {
  readonly schema: S;
  readonly message: (value: string) => string;
};

export type Reply = {
  readonly description: string;
  /** Shape of the body; none for an answer without a documented shape. */
  readonly schema?: z.ZodType;
  /** Default application/json. */
  readonly contentType?: string;
  /** Response headers: name -> meaning. */
  readonly headers?: Readonly<Record<string, string>>;
};

type ParamMap = Record<string, PathParam>;
type Out<S> = S extends z.ZodType ? z.output<S> : undefined;

export type RouteInput<P extends ParamMap, Q, B> = {
  readonly params: { readonly [K in keyof P]: z.output<P[K]['schema']> };
  readonly query: Out<Q>;
  readonly body: Out<B>;
  /**
   * The Idempotency-Key header (checked), on routes that take one, scoped to
   * the caller's client ("<client>/<key>"): two clients never share one, and
   * a client's keys do (a retry after a key rotation replays, never doubles).
   */
  readonly idempotencyKey: string | null;
  /** The API key that called, on routes that need one (null on public and admin routes). */
  readonly caller: Caller | null;
  /**
   * The caller's client (tenant): every object the route reads or changes
   * must be this client's. Reading it on a route without an API key is a
   * programming error and throws.
   */
  readonly client: string;
};

export type RouteSpec<P extends ParamMap, Q extends z.ZodType | undefined, B extends z.ZodType | undefined> = {
  readonly method: HttpMethod;
  /** Express syntax (/orders/:id); the OpenAPI document shows /orders/{id}. */
  readonly path: string;
  readonly summary: string;
  readonly description?: string;
  /** Who may call it; checked before anything else of the request is read. */
  readonly auth: RouteAuth;
  /** Checked in this order, after the query. */
  readonly params?: P;
  readonly query?: Q;
  /** A refused query answers with this instead of VALIDATION_FAILED. */
  readonly queryError?: ErrorCase & { readonly message: string };
  readonly body?: B;
  /** An absent body is read as {} (every field optional). */
  readonly bodyOptional?: boolean;
  /** Largest body this route takes (default BODY_LIMIT), e.g. '256kb' for a batch. */
  readonly bodyLimit?: string;
  readonly idempotencyKey?: boolean;
  readonly responses: Readonly<Record<number, Reply>>;
  /** Errors the handler itself raises (the input checks above add their own). */
  readonly errors?: readonly ErrorCase[];
  readonly handle: (input: RouteInput<P, Q, B>, res: Response, req: Request) => Promise<void> | void;
};

/** What the router and the OpenAPI generator read: the declaration without its types. */
export type RouteDoc = Omit<RouteSpec<ParamMap, z.ZodType | undefined, z.ZodType | undefined>, 'handle'>;
export type Route = { readonly doc: RouteDoc; readonly handler: RequestHandler };

/** The routes of one module, with what they share. */
export type RouteTable = {
  /** OpenAPI tag. */
  readonly tag: string;
  readonly description?: string;
  readonly routes: readonly Route[];
  /** Errors any route of the table may give (e.g. DATABASE_UNAVAILABLE). */
  readonly errors?: readonly ErrorCase[];
  /** Every request under `prefix` needs `Authorization: Bearer <token>` (else 401 UNAUTHORIZED); `what` names the token (default "admin token"). */
  readonly bearer?: { readonly prefix: string; readonly token: string; readonly what?: string };
};

export const HTTP_ERRORS = {
  VALIDATION_FAILED: { status: 400, code: 'VALIDATION_FAILED' },
  INVALID_JSON: { status: 400, code: 'INVALID_JSON' },
  INVALID_IDEMPOTENCY_KEY: { status: 400, code: 'INVALID_IDEMPOTENCY_KEY' },
  UNAUTHORIZED: { status: 401, code: 'UNAUTHORIZED' },
  INSUFFICIENT_SCOPE: { status: 403, code: 'INSUFFICIENT_SCOPE' },
  RATE_LIMITED: { status: 429, code: 'RATE_LIMITED' },
  TOO_MANY_AUTH_FAILURES: { status: 429, code: 'TOO_MANY_AUTH_FAILURES' },
  PAYLOAD_TOO_LARGE: { status: 413, code: 'PAYLOAD_TOO_LARGE' },
  METHOD_NOT_ALLOWED: { status: 405, code: 'METHOD_NOT_ALLOWED' },
  UNSUPPORTED_MEDIA_TYPE: { status: 415, code: 'UNSUPPORTED_MEDIA_TYPE' },
  UNSUPPORTED_ENCODING: { status: 415, code: 'UNSUPPORTED_ENCODING' },
  INTERNAL: { status: 500, code: 'INTERNAL' },
  DATABASE_UNAVAILABLE: { status: 503, code: 'DATABASE_UNAVAILABLE' },
  REDIS_UNAVAILABLE: { status: 503, code: 'REDIS_UNAVAILABLE' },
} as const satisfies Record<string, ErrorCase>;

/** A path parameter naming one of a fixed set of static files; any other name is a 404 NOT_FOUND. */
export function fileParam<const T extends readonly [string, ...string[]]>(names: T) {
  return { schema: z.enum(names), status: 404, code: 'NOT_FOUND', message: (v: string) => `no file ${v}` } satisfies PathParam;
}

export function route<P extends ParamMap = Record<never, PathParam>, Q extends z.ZodType | undefined = undefined, B extends z.ZodType | undefined = undefined>(
  spec: RouteSpec<P, Q, B>,
): Route {
  const { handle, ...doc } = spec;
  const handler: RequestHandler = async (req, res) => {
    // Order matters for which error a request with several faults gets; it is the order the routes always had.
    const query = spec.query ? parseQuery(spec.query, spec.queryError, req.query) : undefined;
    const params: Record<string, unknown> = {};
    for (const [name, p] of Object.entries(spec.params ?? {})) {
      const raw = String(req.params[name]);
      const r = p.schema.safeParse(raw);
      if (!r.success) throw new AppError(p.code, p.status, p.message(raw));
      params[name] = r.data;
    }
    const caller = callerOf(res);
    const given = spec.idempotencyKey ? idempotencyKey(req) : null;
    const key = given !== null && caller ? `${caller.client}/${given}` : given;
    const body = spec.body ? spec.body.parse(req.body ?? (spec.bodyOptional ? {} : undefined)) : undefined;
    // The casts restate what the checks above established for these schemas.
    const input = {
      params,
      query,
      body,
      idempotencyKey: key,
      caller,
      get client(): string {
        if (!caller) throw new Error(`${spec.method} ${spec.path} has no API key, so no client`);
        return caller.client;
      },
    } as RouteInput<P, Q, B>;
    await handle(input, res, req);
  };
  return { doc: doc as RouteDoc, handler };
}

function parseQuery(schema: z.ZodType, error: RouteDoc['queryError'], raw: unknown): unknown {
  if (!error) return schema.parse(raw);
  const r = schema.safeParse(raw);
  if (!r.success) throw new AppError(error.code, error.status, error.message);
  return r.data;
}

/** What a router adds besides the key guard: the public routes' per-address limit, the brake bearer-token failures count in. */
export type RouterExtras = { readonly publicLimit?: RequestHandler; readonly failures?: RateLimit };

/**
 * The express router of one table: its bearer guard (if any) in front, then
 * per route its API-key guard (or, on a public route, the per-address limit),
 * the media type check and the JSON body parser (after the guard: a
 * stranger's body is never read) and the handler. A route that needs a key
 * without a guard to check it, or the admin token outside a guarded table,
 * fails here, when the app is built: no route is ever served open by mistake.
 */
export function routerOf(table: RouteTable, guard?: ApiKeyGuard, extras: RouterExtras = {}): Router {
  const r = Router();
  if (table.bearer) r.use(table.bearer.prefix, bearerAuth(table.bearer.token, { what: table.bearer.what, failures: extras.failures }));
  const json = express.json({ limit: BODY_LIMIT });
  for (const { doc, handler } of table.routes) {
    // Every answer behind a credential holds some client's data (contacts, recipients, keys) and changes with state: never stored by a cache.
    const chain: RequestHandler[] = doc.auth === 'public' ? (extras.publicLimit ? [extras.publicLimit] : []) : [noStore];
    if (doc.auth === 'admin') {
      if (!table.bearer || !doc.path.startsWith(table.bearer.prefix))
        throw new Error(`${doc.method} ${doc.path} needs the admin token outside its table's guard`);
    } else if (doc.auth !== 'public') {
      if (!guard) throw new Error(`${doc.method} ${doc.path} needs an API key but the app has no key guard`);
      chain.push(guard.require(doc.auth));
    }
    if (doc.body) chain.push(jsonOnly, doc.bodyLimit ? express.json({ limit: doc.bodyLimit }) : json);
    r[doc.method](doc.path, ...chain, handler);
  }
  return r;
}

const noStore: RequestHandler = (_req, res, next) => {
  res.set('Cache-Control', 'no-store');
  next();
};

/**
 * A body of another media type is refused before it is read: the JSON parser
 * would skip it and the route would see no body at all. An empty body
 * (no length, or 0) is no body, whatever its Content-Type.
 */
const jsonOnly: RequestHandler = (req, _res, next) => {
  const length = req.get('content-length');
  const hasBody = req.get('transfer-encoding') !== undefined || (length !== undefined && length !== '0');
  if (hasBody && !req.is('application/json')) throw new AppError('UNSUPPORTED_MEDIA_TYPE', 415, 'The body must be application/json');
  next();
};

/** A module's HTTP side: its route table. */
export function httpOf(table: RouteTable): { routes: RouteTable } {
  return { routes: table };
}
