// RFC 9457 problem details: the one shape of every error the API returns.
import type { Response } from 'express';

export type Problem = {
  readonly status: number;
  readonly code: string;
  readonly title: string;
  readonly detail?: string;
  readonly errors?: unknown;
  /** Extension members (RFC 9457 section 3.2), e.g. the missing scope. */
  readonly extra?: Readonly<Record<string, unknown>>;
};

export function sendProblem(res: Response, p: Problem): void {
  res
    .status(p.status)
    .type('application/problem+json')
    .json({ type: `about:blank#${p.code}`, title: p.title, status: p.status, code: p.code, detail: p.detail, errors: p.errors, ...p.extra });
}
