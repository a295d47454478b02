// Application errors with a stable string code; one middleware maps them to an
// HTTP status and an application/problem+json body.

export class AppError extends Error {
  override readonly name = 'AppError';
  constructor(
    readonly code: string,
    readonly status: number,
    message: string,
    readonly details?: unknown,
    /** Headers the answer carries (e.g. Retry-After). */
    readonly headers?: Readonly<Record<string, string>>,
  ) {
    super(message);
  }
}
