// Typed errors of the delay queue: bad input at the API edge of the engine, and
// the signal a handler raises to skip retries.

export const QueueErrorCode = {
  INVALID_JOB_ID: 'INVALID_JOB_ID',
  INVALID_DUE_TIME: 'INVALID_DUE_TIME',
  INVALID_PAYLOAD: 'INVALID_PAYLOAD',
  PAYLOAD_TOO_LARGE: 'PAYLOAD_TOO_LARGE',
  UNKNOWN_JOB_TYPE: 'UNKNOWN_JOB_TYPE',
  INVALID_OPTIONS: 'INVALID_OPTIONS',
  INVALID_PRIORITY: 'INVALID_PRIORITY',
} as const;
export type QueueErrorCode = (typeof QueueErrorCode)[keyof typeof QueueErrorCode];

/** Raised before anything is written to Redis: the caller passed bad input. */
export class QueueInputError extends Error {
  override readonly name = 'QueueInputError';
  constructor(
    readonly code: QueueErrorCode,
    message: string,
  ) {
    super(message);
  }
}

/** Refuses options or arguments of the engine's API that are wrong (INVALID_OPTIONS). */
export function invalidOptions(message: string): never {
  throw new QueueInputError(QueueErrorCode.INVALID_OPTIONS, message);
}

/** Throw from a handler to send the job straight to the dead set: retrying cannot help. */
export class NonRetryableError extends Error {
  override readonly name = 'NonRetryableError';
}

/**
 * Throw from a handler when the receiver answered "too many" or "unavailable"
 * (429 or 503) with a Retry-After: the job fails as any error does, and the
 * worker's limiter slows the job's endpoint down (queue/limits/).
 */
export class ReceiverBusyError extends Error {
  constructor(
    message: string,
    /** The receiver's Retry-After (ms). */
    readonly retryAfterMs: number,
  ) {
    super(message);
  }
}
