// 405 for a path the app serves asked with a method it does not take, with
// the Allow header listing the ones it does; mounted after every router, so
// it runs only when no route answered, and before anything reads the request.
import type { RequestHandler } from 'express';
import { sendProblem } from './problem.js';
import type { RouteTable } from './route.js';

export function methodNotAllowed(tables: readonly RouteTable[]): RequestHandler {
  const paths = new Map<string, { pattern: RegExp; methods: Set<string> }>();
  for (const table of tables) {
    for (const { doc } of table.routes) {
      const entry = paths.get(doc.path) ?? { pattern: patternOf(doc.path), methods: new Set<string>() };
      entry.methods.add(doc.method.toUpperCase());
      // Express answers HEAD with a GET route.
      if (doc.method === 'get') entry.methods.add('HEAD');
      paths.set(doc.path, entry);
    }
  }
  return (req, res, next) => {
    const allowed = new Set<string>();
    for (const { pattern, methods } of paths.values()) if (pattern.test(req.path)) for (const m of methods) allowed.add(m);
    if (allowed.size === 0 || allowed.has(req.method)) return next();
    const allow = [...allowed].sort().join(', ');
    res.set('Allow', allow);
    sendProblem(res, { status: 405, code: 'METHOD_NOT_ALLOWED', title: 'This path does not take that method', detail: `allowed: ${allow}` });
  };
}

/**
 * An express path of literal segments and `:name` parameters as the router
 * matches it: case-insensitive, a trailing slash allowed. A parameter matches
 * one non-empty segment.
 */
function patternOf(path: string): RegExp {
  const segments = path.split('/').map((s) => (s.startsWith(':') ? '[^/]+' : s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')));
  return new RegExp(`^${segments.join('/')}/?$`, 'i');
}
