// The error funnel: every error a route throws ends here and leaves as
// application/problem+json. Client mistakes are 4xx with a stable code;
// anything unknown is logged with its cause and answered 500 without internals.
import type { ErrorRequestHandler, RequestHandler } from 'express';
import { ZodError } from 'zod';
import { isDatabaseUnavailable } from '../db-errors.js';
import { isRedisUnavailable } from '../redis-call.js';
import { AppError } from '../errors.js';
import type { Logger } from '../logger.js';
import { sendProblem } from './problem.js';

export const notFound: RequestHandler = (req, res) => {
  sendProblem(res, { status: 404, code: 'NOT_FOUND', title: 'Not found', detail: `no route for ${req.method} ${req.path}` });
};

type BodyParserError = Error & { type?: string; status?: number };

export function errorMiddleware(log: Logger): ErrorRequestHandler {
  return (err: unknown, req, res, _next) => {
    if (res.headersSent) return;
    if (err instanceof AppError) {
      if (err.headers) res.set(err.headers);
      return sendProblem(res, { status: err.status, code: err.code, title: err.message, errors: err.details });
    }
    if (err instanceof ZodError) {
      const errors = err.issues.map((i) => ({ path: i.path.join('.'), message: i.message }));
      return sendProblem(res, { status: 400, code: 'VALIDATION_FAILED', title: 'The request is not valid', errors });
    }
    const bp = err as BodyParserError;
    if (bp.type === 'entity.parse.failed') {
      return sendProblem(res, { status: 400, code: 'INVALID_JSON', title: 'The body is not valid JSON' });
    }
    if (bp.type === 'entity.too.large') {
      return sendProblem(res, { status: 413, code: 'PAYLOAD_TOO_LARGE', title: 'The body is too large' });
    }
    if (bp.type === 'encoding.unsupported' || bp.type === 'charset.unsupported') {
      return sendProblem(res, { status: 415, code: 'UNSUPPORTED_ENCODING', title: 'Unsupported body encoding' });
    }
    if (typeof bp.status === 'number' && bp.status >= 400 && bp.status < 500) {
      return sendProblem(res, { status: bp.status, code: 'BAD_REQUEST', title: 'The request could not be read' });
    }
    if (isDatabaseUnavailable(err)) {
      log.warn({ err, requestId: res.locals.requestId, method: req.method, path: req.path }, 'database unavailable');
      res.set('Retry-After', '2');
      return sendProblem(res, { status: 503, code: 'DATABASE_UNAVAILABLE', title: 'The database is not answering; retry shortly' });
    }
    if (isRedisUnavailable(err)) {
      log.warn({ err, requestId: res.locals.requestId, method: req.method, path: req.path }, 'redis unavailable');
      res.set('Retry-After', '2');
      return sendProblem(res, { status: 503, code: 'REDIS_UNAVAILABLE', title: 'The queue store (Redis) is not answering; retry shortly' });
    }
    log.error({ err, requestId: res.locals.requestId, method: req.method, path: req.path }, 'unhandled error');
    sendProblem(res, { status: 500, code: 'INTERNAL', title: 'Internal error' });
  };
}
