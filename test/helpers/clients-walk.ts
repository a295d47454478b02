// Parts of the two-client walk (test/integration/service/clients.walk.test.ts):
// the routes the OpenAPI document says need an API key, a check that a probe
// calls the route it is listed under, and an answer with the values it names
// masked, so an answer about another client's object can be set beside one
// about an unknown object.
import type { Test } from 'supertest';

type Security = Record<string, string[]>[];
export type OpenApiDoc = { paths: Record<string, Record<string, { security?: Security }>> };

const API_KEY = 'apiKey';
/** The credentials the walk leaves out: none (public) and the operators' token. */
const NOT_WALKED = new Set(['adminToken']);

/**
 * "METHOD /path" of every operation whose security names the API-key scheme.
 * An operation under a scheme the walk does not know throws: a new kind of
 * credential must be placed on one side or the other, never skipped.
 */
export function keyRoutes(doc: OpenApiDoc): string[] {
  return Object.entries(doc.paths).flatMap(([path, ops]) =>
    Object.entries(ops).flatMap(([method, op]) => {
      const schemes = (op.security ?? []).flatMap((req) => Object.keys(req));
      const unknown = schemes.filter((s) => s !== API_KEY && !NOT_WALKED.has(s));
      if (unknown.length > 0) throw new Error(`${method.toUpperCase()} ${path} needs ${unknown.join(', ')}: walk it or leave it out, explicitly`);
      return schemes.includes(API_KEY) ? [`${method.toUpperCase()} ${path}`] : [];
    }),
  );
}

/** Whether the request `req` goes to the documented route `route` ("METHOD /path/{param}"). */
export function callsRoute(req: Test, route: string): boolean {
  const [method, template] = route.split(' ') as [string, string];
  const pattern = new RegExp(`^${template.replace(/\{[^}]+\}/g, '[^/]+')}$`);
  return req.method.toUpperCase() === method && pattern.test(new URL(req.url).pathname);
}

/** `body` with every occurrence of each value of `values` replaced by `<its name>` (the longest values first). */
export function masked(body: unknown, values: Readonly<Record<string, string>>): unknown {
  let text = JSON.stringify(body) ?? 'null';
  const byLength = Object.entries(values).sort(([, a], [, b]) => b.length - a.length);
  for (const [name, value] of byLength) text = text.split(value).join(`<${name}>`);
  return JSON.parse(text) as unknown;
}
